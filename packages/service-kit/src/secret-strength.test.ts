import { describe, expect, it } from "@jest/globals";
import { ConfigError, parseEnv, readTrustProxy } from "./config.js";
import { MIN_TOKEN_LENGTH, weakTokenProblem } from "./secret-strength.js";

describe("weakTokenProblem", () => {
  it.each([
    ["a".repeat(16), /at least 32 characters long, got 16/],
    ["dev-admin-token-change-me", /at least 32 characters long, got 25/],
    ["a".repeat(64), /only 1 distinct characters/],
    ["abababababababababababababababababab", /only 2 distinct characters/],
    ["0123456789".repeat(4), /repeats one 10-character pattern/],
    ["abcdefghijkl".repeat(3), /repeats one 12-character pattern/],
    // A partial last copy is still one pattern repeated.
    [`${"q1w2e3r4t5y6".repeat(3)}q1w2`, /repeats one 12-character pattern/],
  ])("refuses %s, naming the variable and not the value", (value, reason) => {
    const problem = weakTokenProblem("ADMIN_TOKEN", value);
    expect(problem).toMatch(/^ADMIN_TOKEN /);
    expect(problem).toMatch(reason);
    expect(problem).not.toContain(value.slice(0, 8));
  });

  it.each([
    "3f9c1a7e5b2d8046e1c9a3f7b5d2e8014c6a9f3e7b1d5c2a",
    "dev-admin-token-change-me-2f8c1e6a9b7d4053",
    `test-admin-${"0f1e2d3c4b5a69788796a5b4c3d2e1f0"}`,
  ])("accepts %s", (value) => {
    expect(value.length).toBeGreaterThanOrEqual(MIN_TOKEN_LENGTH);
    expect(weakTokenProblem("INGEST_TOKEN", value)).toBeNull();
  });

  it("leaves an empty value to the required check", () => {
    expect(weakTokenProblem("INGEST_TOKEN", "")).toBeNull();
  });
});

describe("TRUST_PROXY", () => {
  const read = (value: string | undefined) => parseEnv(value === undefined ? {} : { TRUST_PROXY: value }, (r) => ({ trust: readTrustProxy(r) })).trust;
  const problems = (value: string) => {
    try {
      read(value);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).problems;
    }
    throw new Error(`accepted ${value}`);
  };

  it("trusts no proxy when unset, 0 or false", () => {
    expect(read(undefined)).toBe(false);
    expect(read("0")).toBe(false);
    expect(read("false")).toBe(false);
  });

  it("takes a number of proxies or a list of addresses, blocks and names", () => {
    expect(read("2")).toBe(2);
    expect(read("10.0.0.0/8, loopback,fd00::/8 ,192.0.2.7")).toEqual(["10.0.0.0/8", "loopback", "fd00::/8", "192.0.2.7"]);
  });

  it.each([
    ["true", /TRUST_PROXY=true would believe any X-Forwarded-For/],
    ["11", /between 0 and 10/],
    ["10.0.0.0/33", /TRUST_PROXY must be .* got "10\.0\.0\.0\/33"/],
    ["proxy.internal", /got "proxy\.internal"/],
  ])("refuses %s", (value, reason) => {
    expect(problems(value)[0]).toMatch(reason);
  });
});
