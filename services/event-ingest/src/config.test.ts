import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "@vw/service-kit";
import { loadConfig } from "./config.js";

const valid = {
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/vw",
  INGEST_TOKEN: "0123456789abcdef",
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
      port: 3002,
      logLevel: "info",
      databaseUrl: valid.DATABASE_URL,
      redisUrl: "redis://127.0.0.1:6379",
      redisKeyPrefix: "vw",
      ingestToken: valid.INGEST_TOKEN,
      playUrl: "https://play.localhost",
      maxEventsPerRequest: 500,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("reads every variable, keeps the Redis database number and drops trailing slashes", () => {
    const config = loadConfig({
      ...valid,
      PORT: "8080",
      LOG_LEVEL: "debug",
      REDIS_URL: "redis://:pw@redis.internal:6380/3",
      REDIS_KEY_PREFIX: "vw:staging:",
      PLAY_URL: "https://play.example.com//",
      MAX_EVENTS_PER_REQUEST: "50",
    });
    expect(config).toMatchObject({
      port: 8080,
      logLevel: "debug",
      redisUrl: "redis://:pw@redis.internal:6380/3",
      redisKeyPrefix: "vw:staging:",
      playUrl: "https://play.example.com",
      maxEventsPerRequest: 50,
    });
  });

  it("names a missing DATABASE_URL and INGEST_TOKEN", () => {
    expect(problemsOf({})).toEqual(["INGEST_TOKEN is required", "DATABASE_URL is required"]);
  });

  it("refuses an INGEST_TOKEN shorter than 16 characters without echoing it, and accepts exactly 16", () => {
    const problems = problemsOf({ ...valid, INGEST_TOKEN: "short-secret" });
    expect(problems).toEqual(["INGEST_TOKEN must be at least 16 characters long, got 12"]);
    expect(problems.join("\n")).not.toContain("short-secret");
    expect(loadConfig({ ...valid, INGEST_TOKEN: "x".repeat(16) }).ingestToken).toBe("x".repeat(16));
  });

  it("names every malformed variable at once", () => {
    const problems = problemsOf({
      DATABASE_URL: "mysql://localhost/vw",
      INGEST_TOKEN: valid.INGEST_TOKEN,
      PORT: "http",
      LOG_LEVEL: "loud",
      REDIS_URL: "http://localhost:6379",
      REDIS_KEY_PREFIX: "has space",
      PLAY_URL: "ftp://play.example.com",
      MAX_EVENTS_PER_REQUEST: "0",
    });
    expect(problems).toHaveLength(7);
    for (const name of ["PORT", "LOG_LEVEL", "DATABASE_URL", "REDIS_URL", "REDIS_KEY_PREFIX", "PLAY_URL", "MAX_EVENTS_PER_REQUEST"]) {
      expect(problems.some((p) => p.startsWith(`${name} `))).toBe(true);
    }
  });

  it("bounds MAX_EVENTS_PER_REQUEST", () => {
    expect(problemsOf({ ...valid, MAX_EVENTS_PER_REQUEST: "10001" })).toEqual(["MAX_EVENTS_PER_REQUEST must be between 1 and 10000, got 10001"]);
    expect(problemsOf({ ...valid, MAX_EVENTS_PER_REQUEST: "many" })).toEqual(['MAX_EVENTS_PER_REQUEST must be an integer, got "many"']);
  });
});
