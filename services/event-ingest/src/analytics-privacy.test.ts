import { describe, expect, it } from "@jest/globals";
import { pseudonymKey, pseudonymOf, readWorldAnalytics } from "./analytics-privacy.js";

describe("pseudonyms", () => {
  it("derive a stable key from the secret-box keys unless one is configured", () => {
    expect(pseudonymKey(null, "a").equals(pseudonymKey(null, "a"))).toBe(true);
    expect(pseudonymKey(null, "a").equals(pseudonymKey(null, "b"))).toBe(false);
    expect(pseudonymKey("x".repeat(32), "a").toString()).toBe("x".repeat(32));
  });

  it("are base64url, 22 characters, per world and per member", () => {
    const key = pseudonymKey(null, "a");
    const p = pseudonymOf(key, "w1", "m1");
    expect(p).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(pseudonymOf(key, "w1", "m1")).toBe(p);
    expect(pseudonymOf(key, "w2", "m1")).not.toBe(p);
    expect(pseudonymOf(key, "w1", "m2")).not.toBe(p);
  });
});

describe("readWorldAnalytics", () => {
  it("reads missing members as on and malformed ones as the private choice", () => {
    expect(readWorldAnalytics({})).toEqual({
      enabled: true,
      userLevelActivity: true,
      categories: { presenceAndSessions: true, collaboration: true, workspaceActions: true, qualityDiagnostics: true },
    });
    expect(readWorldAnalytics({ enabled: "yes", userLevelActivity: 1, categories: { collaboration: null } })).toMatchObject({
      enabled: false,
      userLevelActivity: false,
      categories: { collaboration: false, presenceAndSessions: true },
    });
  });
});
