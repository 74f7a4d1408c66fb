import { describe, expect, it } from "@jest/globals";
import { classify, type AttemptOutcome } from "./outcome.js";

const answered = (status: number): Pick<AttemptOutcome, "status" | "error"> => ({ status });

describe("classify (spec: Errors > Answers of a receiver)", () => {
  it.each([200, 201, 202, 204, 299])("%i is delivered", (status) => {
    expect(classify(answered(status))).toBe("delivered");
  });

  it.each([408, 429, 500, 502, 503, 504, 599])("%i is retried", (status) => {
    expect(classify(answered(status))).toBe("retry");
  });

  it("410 is gone: disable at once, no retry", () => {
    expect(classify(answered(410))).toBe("gone");
  });

  it.each([400, 401, 403, 404, 405, 409, 413, 415, 422, 451, 499])("%i is rejected without retry", (status) => {
    expect(classify(answered(status))).toBe("rejected");
  });

  it("a timeout and a connection error are retried", () => {
    expect(classify({ error: { kind: "timeout", message: "Timeout awaiting 'request' for 15000ms" } })).toBe("retry");
    expect(classify({ error: { kind: "connection", message: "connect ECONNREFUSED 127.0.0.1:9" } })).toBe("retry");
  });

  it("a policy refusal is rejected, never retried", () => {
    expect(classify({ error: { kind: "refused-by-policy", message: "127.0.0.1 is a loopback address" } })).toBe("rejected");
  });

  it.each([301, 302, 303, 307, 308])("a %i redirect (not followed) is rejected", (status) => {
    expect(classify({ status, error: { kind: "redirect", message: "redirect not followed" } })).toBe("rejected");
  });

  it("a status received before the body read failed decides the verdict", () => {
    expect(classify({ status: 200, error: { kind: "timeout", message: "body stalled" } })).toBe("delivered");
    expect(classify({ status: 404, error: { kind: "connection", message: "socket hang up" } })).toBe("rejected");
  });

  it("a non-standard status from a broken server is retried like a 5xx", () => {
    expect(classify(answered(600))).toBe("retry");
    expect(classify(answered(199))).toBe("retry");
  });
});
