import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "@vw/service-kit";
import { loadConfig } from "./config.js";

const valid = {
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/vw",
  INGEST_TOKEN: "c4e81f7a2b9d6053e7a1c9f4b2d8e6a3",
  SECRETS_ENCRYPTION_KEY: Buffer.from("5e2a8c1f7b3d9e0a4c6f8b2d1e3a5c7f9b0d2e4a6c8f1b3d5e7a9c0e2f4b6d8a", "hex").toString("base64"),
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
      host: "0.0.0.0",
      logLevel: "info",
      logFormat: "json",
      tracing: { endpoint: null, protocol: "http/protobuf", serviceName: null, sampler: "parentbased_always_on", samplerRatio: 1 },
      database: { url: valid.DATABASE_URL, directUrl: valid.DATABASE_URL, pgbouncer: false, poolMax: 10, applicationName: "event-ingest" },
      redis: { kind: "standalone", url: "redis://127.0.0.1:6379", password: null, tls: false },
      redisKeyPrefix: "vw",
      ingestToken: valid.INGEST_TOKEN,
      playUrl: "https://play.localhost",
      queueShards: 16,
      maxEventsPerRequest: 500,
      authHookTimeoutMs: 5000,
      endpointUrlPolicy: "public-https",
      deliveryProxy: null,
      secretsEncryptionKey: valid.SECRETS_ENCRYPTION_KEY,
      analyticsPseudonymKey: null,
      analyticsBufferMax: 1000,
      analyticsBufferMaxPerWorld: 10_000,
      analyticsEventMaxBytes: 16 * 1024,
      analyticsBufferMaxBytesPerWorld: 16 * 1024 * 1024,
      authThrottle: { maxFailures: 20, windowMs: 60_000 },
      trustProxy: false,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("reads the analytics settings and refuses a short ANALYTICS_PSEUDONYM_KEY without echoing it", () => {
    const key = "k".repeat(32);
    expect(loadConfig({ ...valid, ANALYTICS_PSEUDONYM_KEY: key, ANALYTICS_BUFFER_MAX: "200" })).toMatchObject({
      analyticsPseudonymKey: key,
      analyticsBufferMax: 200,
    });
    const problems = problemsOf({ ...valid, ANALYTICS_PSEUDONYM_KEY: "short-secret", ANALYTICS_BUFFER_MAX: "0" });
    expect(problems.join("\n")).toMatch(/ANALYTICS_PSEUDONYM_KEY/);
    expect(problems.join("\n")).toMatch(/ANALYTICS_BUFFER_MAX/);
    expect(problems.join("\n")).not.toContain("short-secret");
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
      AUTH_HOOK_TIMEOUT_MS: "750",
      ENDPOINT_URL_POLICY: "any",
    });
    expect(config).toMatchObject({
      port: 8080,
      logLevel: "debug",
      redis: { kind: "standalone", url: "redis://:pw@redis.internal:6380/3" },
      redisKeyPrefix: "vw:staging:",
      playUrl: "https://play.example.com",
      maxEventsPerRequest: 50,
      authHookTimeoutMs: 750,
      endpointUrlPolicy: "any",
    });
  });

  it("reads a Sentinel or Cluster topology instead of REDIS_URL, and refuses two at once naming both", () => {
    expect(loadConfig({ ...valid, REDIS_SENTINELS: "s0:26379", REDIS_SENTINEL_MASTER: "vw", REDIS_SENTINEL_PASSWORD: "spw" }).redis).toMatchObject({ kind: "sentinel", sentinelPassword: "spw" });
    expect(loadConfig({ ...valid, REDIS_CLUSTER_NODES: "c0:6379" }).redis).toMatchObject({ kind: "cluster" });
    expect(problemsOf({ ...valid, REDIS_URL: "redis://cache:6379", REDIS_SENTINELS: "s0:26379", REDIS_SENTINEL_MASTER: "vw" })[0]).toMatch(/^REDIS_URL and REDIS_SENTINELS are both set/);
  });

  it("names a missing DATABASE_URL, INGEST_TOKEN and SECRETS_ENCRYPTION_KEY", () => {
    expect(problemsOf({})).toEqual(["INGEST_TOKEN is required", "SECRETS_ENCRYPTION_KEY is required", "DATABASE_URL is required"]);
  });

  it("refuses a malformed SECRETS_ENCRYPTION_KEY without echoing it, an unknown ENDPOINT_URL_POLICY and a zero AUTH_HOOK_TIMEOUT_MS", () => {
    const problems = problemsOf({ ...valid, SECRETS_ENCRYPTION_KEY: "not-a-key", ENDPOINT_URL_POLICY: "open", AUTH_HOOK_TIMEOUT_MS: "0" });
    expect(problems).toHaveLength(3);
    expect(problems.some((p) => p.startsWith("SECRETS_ENCRYPTION_KEY: "))).toBe(true);
    expect(problems.join("\n")).not.toContain("not-a-key");
    expect(problems.some((p) => p.startsWith("ENDPOINT_URL_POLICY "))).toBe(true);
    expect(problems.some((p) => p.startsWith("AUTH_HOOK_TIMEOUT_MS "))).toBe(true);
  });

  it.each([
    ["short-secret", /^INGEST_TOKEN must be at least 32 characters long, got 12/],
    ["x".repeat(16), /^INGEST_TOKEN must be at least 32 characters long, got 16/],
    ["ab".repeat(20), /^INGEST_TOKEN has only 2 distinct characters/],
    ["Pass-Word12".repeat(3), /^INGEST_TOKEN repeats one 11-character pattern/],
  ])("refuses a weak INGEST_TOKEN (%s) without echoing it", (token, reason) => {
    const problems = problemsOf({ ...valid, INGEST_TOKEN: token });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(reason);
    expect(problems.join("\n")).not.toContain(token.slice(0, 10));
  });

  it("refuses an all-zero SECRETS_ENCRYPTION_KEY, naming the variable", () => {
    expect(problemsOf({ ...valid, SECRETS_ENCRYPTION_KEY: Buffer.alloc(32).toString("base64") })).toEqual([expect.stringMatching(/^SECRETS_ENCRYPTION_KEY: .*all zeros/)]);
  });

  it("reads ANALYTICS_BUFFER_MAX_PER_WORLD, the authentication throttle and TRUST_PROXY", () => {
    expect(loadConfig({ ...valid, ANALYTICS_BUFFER_MAX_PER_WORLD: "500", AUTH_FAILURES_MAX: "3", AUTH_FAILURES_WINDOW_S: "120", TRUST_PROXY: "loopback" })).toMatchObject({
      analyticsBufferMaxPerWorld: 500,
      authThrottle: { maxFailures: 3, windowMs: 120_000 },
      trustProxy: ["loopback"],
    });
    expect(problemsOf({ ...valid, ANALYTICS_BUFFER_MAX_PER_WORLD: "0" })).toEqual(["ANALYTICS_BUFFER_MAX_PER_WORLD must be between 1 and 10000000, got 0"]);
  });

  it("names every malformed variable at once", () => {
    const problems = problemsOf({
      DATABASE_URL: "mysql://localhost/vw",
      INGEST_TOKEN: valid.INGEST_TOKEN,
      SECRETS_ENCRYPTION_KEY: valid.SECRETS_ENCRYPTION_KEY,
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

  it.each([
    ["https://play.example.com/?ref=mail", `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com/?ref=mail"`],
    ["https://play.example.com#lobby", `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com#lobby"`],
    ["https://play.example.com/play?", `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com/play?"`],
    ["https://ops:hunter2@play.example.com", "PLAY_URL must not contain credentials (it is sent in every analytics.batch envelope)"],
  ])("refuses PLAY_URL=%s (room and world URLs append /@/<org>/<world> to it), never echoing credentials", (value, message) => {
    const problems = problemsOf({ ...valid, PLAY_URL: value });
    expect(problems).toEqual([message]);
    expect(problems.join("\n")).not.toContain("hunter2");
  });

  it("accepts a PLAY_URL with a path", () => {
    expect(loadConfig({ ...valid, PLAY_URL: "http://localhost:8080/play/" }).playUrl).toBe("http://localhost:8080/play");
  });

  it("bounds MAX_EVENTS_PER_REQUEST", () => {
    expect(problemsOf({ ...valid, MAX_EVENTS_PER_REQUEST: "10001" })).toEqual(["MAX_EVENTS_PER_REQUEST must be between 1 and 10000, got 10001"]);
    expect(problemsOf({ ...valid, MAX_EVENTS_PER_REQUEST: "many" })).toEqual(['MAX_EVENTS_PER_REQUEST must be an integer, got "many"']);
  });

  it("sends the auth hook through DELIVERY_PROXY_URL when set, and names a bad one without its password", () => {
    expect(loadConfig(valid).deliveryProxy).toBeNull();
    expect(loadConfig({ ...valid, DELIVERY_PROXY_URL: "http://egress.internal:3128" }).deliveryProxy).toMatchObject({ host: "egress.internal", port: 3128, authorization: null });
    const problems = problemsOf({ ...valid, DELIVERY_PROXY_URL: "http://hooks:s3cr3t-pw@egress.internal" });
    expect(problems).toEqual([expect.stringMatching(/^DELIVERY_PROXY_URL must be http:\/\/\[user:password@\]host:port \(the port is missing\)$/)]);
    expect(problems.join()).not.toContain("s3cr3t-pw");
  });
});
