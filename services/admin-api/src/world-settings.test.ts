import { describe, expect, it } from "@jest/globals";
import { DEFAULT_WORLD_ANALYTICS } from "@vw/contracts";
import { mergeAnalytics, normalizeIdentityProviders, readAnalytics, readIdentityProviders } from "./world-settings.js";

describe("readAnalytics", () => {
  it("completes missing or malformed stored members with the defaults", () => {
    expect(readAnalytics({ enabled: false, categories: { collaboration: false, workspaceActions: "no" } })).toEqual({
      enabled: false,
      userLevelActivity: true,
      categories: { presenceAndSessions: true, collaboration: false, workspaceActions: true, qualityDiagnostics: true },
    });
    expect(readAnalytics(null)).toEqual(DEFAULT_WORLD_ANALYTICS);
    expect(readAnalytics([])).toEqual(DEFAULT_WORLD_ANALYTICS);
  });

  it("drops members it does not know", () => {
    expect(readAnalytics({ extra: 1, categories: { other: false } })).toEqual(DEFAULT_WORLD_ANALYTICS);
  });
});

describe("mergeAnalytics", () => {
  const current = readAnalytics({ userLevelActivity: false, categories: { collaboration: false } });

  it("changes only the members given, category by category", () => {
    expect(mergeAnalytics(current, { categories: { qualityDiagnostics: false } })).toEqual({
      enabled: true,
      userLevelActivity: false,
      categories: { presenceAndSessions: true, collaboration: false, workspaceActions: true, qualityDiagnostics: false },
    });
    expect(mergeAnalytics(current, { enabled: false, categories: { collaboration: true } })).toEqual({
      enabled: false,
      userLevelActivity: false,
      categories: { presenceAndSessions: true, collaboration: true, workspaceActions: true, qualityDiagnostics: true },
    });
  });

  it("keeps everything for an empty or absent patch and does not mutate its input", () => {
    const before = structuredClone(current);
    expect(mergeAnalytics(current, {})).toEqual(before);
    expect(mergeAnalytics(current, undefined)).toEqual(before);
    mergeAnalytics(current, { categories: { presenceAndSessions: false } });
    expect(current).toEqual(before);
  });
});

describe("identity providers", () => {
  it("default exposeAccessToken to false", () => {
    expect(normalizeIdentityProviders([{ id: "okta", kind: "openid-connect" }, { id: "gh", kind: "github", exposeAccessToken: true }])).toEqual([
      { id: "okta", kind: "openid-connect", exposeAccessToken: false },
      { id: "gh", kind: "github", exposeAccessToken: true },
    ]);
  });

  it("read back only well-formed stored entries", () => {
    expect(
      readIdentityProviders([
        { id: "okta", kind: "openid-connect", exposeAccessToken: true },
        { id: "x", kind: "myspace" },
        "junk",
        { kind: "google" },
      ]),
    ).toEqual([{ id: "okta", kind: "openid-connect", exposeAccessToken: true }]);
    expect(readIdentityProviders({})).toEqual([]);
  });
});
