import { describe, expect, it } from "@jest/globals";
import { connectionFieldsFromUrl } from "./pg-compat.js";

describe("connectionFieldsFromUrl", () => {
  it("splits a URL into separate, percent-decoded fields", () => {
    expect(connectionFieldsFromUrl("postgresql://app%40x:p%2Fss%3Aw@db.internal:6543/vw%5Fmain")).toEqual({
      host: "db.internal",
      port: 6543,
      user: "app@x",
      password: "p/ss:w",
      database: "vw_main",
    });
  });

  it("defaults the port and leaves out what the URL does not give", () => {
    expect(connectionFieldsFromUrl("postgres://127.0.0.1")).toEqual({ host: "127.0.0.1", port: 5432 });
  });

  it("unwraps IPv6 hosts", () => {
    expect(connectionFieldsFromUrl("postgresql://u@[::1]:5433/d")).toMatchObject({ host: "::1", port: 5433 });
  });

  it("maps sslmode to pg's ssl option", () => {
    expect(connectionFieldsFromUrl("postgresql://h/d?sslmode=disable").ssl).toBeUndefined();
    expect(connectionFieldsFromUrl("postgresql://h/d?sslmode=require").ssl).toEqual({ rejectUnauthorized: false });
    expect(connectionFieldsFromUrl("postgresql://h/d?sslmode=verify-full").ssl).toEqual({ rejectUnauthorized: true });
  });
});
