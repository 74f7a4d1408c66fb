import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "@vw/service-kit";
import { loadConfig } from "./config.js";

const valid = {
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/vw",
  ADMIN_TOKEN: "0123456789abcdef",
};

function problemsOf(env: Record<string, string | undefined>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("loadConfig accepted the environment");
}

describe("loadConfig", () => {
  it("applies the documented defaults", () => {
    const config = loadConfig(valid);
    expect(config).toEqual({
      port: 3003,
      logLevel: "info",
      databaseUrl: valid.DATABASE_URL,
      adminToken: valid.ADMIN_TOKEN,
      publicMapStorageUrl: "http://localhost:3001",
      playUrl: "https://play.localhost",
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("reads every variable and drops trailing slashes of public URLs", () => {
    const config = loadConfig({
      ...valid,
      PORT: "8080",
      LOG_LEVEL: "debug",
      PUBLIC_MAP_STORAGE_URL: "https://maps.example.com/",
      PLAY_URL: "https://play.example.com//",
    });
    expect(config).toMatchObject({
      port: 8080,
      logLevel: "debug",
      publicMapStorageUrl: "https://maps.example.com",
      playUrl: "https://play.example.com",
    });
  });

  it("names a missing DATABASE_URL and ADMIN_TOKEN", () => {
    expect(problemsOf({})).toEqual(["ADMIN_TOKEN is required", "DATABASE_URL is required"]);
  });

  it("refuses an ADMIN_TOKEN shorter than 16 characters without echoing it", () => {
    const problems = problemsOf({ ...valid, ADMIN_TOKEN: "short-secret" });
    expect(problems).toEqual(["ADMIN_TOKEN must be at least 16 characters long, got 12"]);
    expect(problems.join("\n")).not.toContain("short-secret");
  });

  it("accepts an ADMIN_TOKEN of exactly 16 characters", () => {
    expect(loadConfig({ ...valid, ADMIN_TOKEN: "x".repeat(16) }).adminToken).toBe("x".repeat(16));
  });

  it("names every malformed variable at once", () => {
    const problems = problemsOf({
      DATABASE_URL: "mysql://localhost/vw",
      ADMIN_TOKEN: valid.ADMIN_TOKEN,
      PORT: "http",
      LOG_LEVEL: "loud",
      PUBLIC_MAP_STORAGE_URL: "not a url",
      PLAY_URL: "ftp://play.example.com",
    });
    expect(problems).toHaveLength(5);
    for (const name of ["PORT", "LOG_LEVEL", "DATABASE_URL", "PUBLIC_MAP_STORAGE_URL", "PLAY_URL"]) {
      expect(problems.some((p) => p.startsWith(`${name} `))).toBe(true);
    }
  });

  it("refuses a port out of range", () => {
    expect(problemsOf({ ...valid, PORT: "70000" })).toEqual(["PORT must be between 0 and 65535, got 70000"]);
  });
});
