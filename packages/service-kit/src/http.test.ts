import { describe, expect, it } from "@jest/globals";
import { isDependencyUnavailable } from "./dependency-status.js";

/** An error as pg raises it: a message and, for server errors, the SQLSTATE as `code`. */
const pgError = (message: string, code?: string): Error => Object.assign(new Error(message), code === undefined ? {} : { code });

describe("isDependencyUnavailable", () => {
  it("counts a database that cannot be reached or went away, as pg reports it, as unavailable (503)", () => {
    expect(isDependencyUnavailable(pgError("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED"))).toBe(true);
    expect(isDependencyUnavailable(pgError("Connection terminated unexpectedly"))).toBe(true);
    expect(isDependencyUnavailable(pgError("timeout exceeded when trying to connect"))).toBe(true);
    expect(isDependencyUnavailable(pgError("terminating connection due to administrator command", "57P01"))).toBe(true);
    expect(isDependencyUnavailable(pgError("the database system is starting up", "57P03"))).toBe(true);
    expect(isDependencyUnavailable(pgError("sorry, too many clients already", "53300"))).toBe(true);
    expect(isDependencyUnavailable(pgError("connection failure", "08006"))).toBe(true);
    expect(isDependencyUnavailable(pgError("the database system is shutting down", "57P03"))).toBe(true);
    expect(isDependencyUnavailable(pgError("read ECONNRESET", "ECONNRESET"))).toBe(true);
    expect(isDependencyUnavailable(pgError("Client has encountered a connection error and is not queryable"))).toBe(true);
  });

  it("leaves a statement's own errors (a bug or bad data) as internal (500)", () => {
    expect(isDependencyUnavailable(pgError('relation "nope" does not exist', "42P01"))).toBe(false);
    expect(isDependencyUnavailable(pgError("duplicate key value violates unique constraint", "23505"))).toBe(false);
    expect(isDependencyUnavailable(new TypeError("x is not a function"))).toBe(false);
    expect(isDependencyUnavailable(null)).toBe(false);
  });
});
