import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "@vw/service-kit";
import { loadConfig } from "./config.js";

// Two distinct base64 32-byte keys (test values only).
const KEY_A = Buffer.from("8f1c3e5a7b9d0f2e4c6a8b0d2f4e6a8c1b3d5f7e9a0c2e4f6b8d0a2c4e6f8b0d", "hex").toString("base64");
const KEY_B = Buffer.from("1a3c5e7f9b0d2e4a6c8f0b2d4e6a8c0e2f4b6d8a0c2e4f6a8b0d2f4c6e8a0b2d", "hex").toString("base64");

const valid = {
  DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/vw",
  ADMIN_TOKEN: "7d2f9a4c1e8b6053a9c2e7f14b8d6a3e",
  SECRETS_ENCRYPTION_KEY: KEY_A,
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
  it("reads a Sentinel or Cluster topology instead of REDIS_URL, and refuses two at once", () => {
    expect(loadConfig({ ...valid, REDIS_SENTINELS: "s0:26379,s1:26379", REDIS_SENTINEL_MASTER: "vw", REDIS_PASSWORD: "pw" }).redis).toEqual({
      kind: "sentinel",
      sentinels: [{ host: "s0", port: 26379 }, { host: "s1", port: 26379 }],
      masterName: "vw",
      password: "pw",
      sentinelPassword: null,
      tls: false,
    });
    expect(loadConfig({ ...valid, REDIS_CLUSTER_NODES: "c0:6379", REDIS_TLS: "true" }).redis).toEqual({ kind: "cluster", nodes: [{ host: "c0", port: 6379 }], password: null, tls: true });
    const [problem] = problemsOf({ ...valid, REDIS_URL: "redis://cache:6379", REDIS_CLUSTER_NODES: "c0:6379" });
    expect(problem).toMatch(/^REDIS_URL and REDIS_CLUSTER_NODES are both set/);
  });

  it("applies the documented defaults", () => {
    const config = loadConfig(valid);
    expect(config).toEqual({
      port: 3003,
      host: "0.0.0.0",
      logLevel: "info",
      logFormat: "json",
      tracing: { endpoint: null, protocol: "http/protobuf", serviceName: null, sampler: "parentbased_always_on", samplerRatio: 1 },
      database: { url: valid.DATABASE_URL, directUrl: valid.DATABASE_URL, pgbouncer: false, poolMax: 5, applicationName: "admin-api" },
      adminToken: valid.ADMIN_TOKEN,
      publicMapStorageUrl: "http://localhost:3001",
      queueShards: 16,
      playUrl: "https://play.localhost",
      endpointUrlPolicy: "public-https",
      deliveryProxy: null,
      secretsEncryptionKey: KEY_A,
      redis: { kind: "standalone", url: "redis://127.0.0.1:6379", password: null, tls: false },
      redisKeyPrefix: "vw",
      deliveryTimeoutMs: 15_000,
      publicAdminUrl: "http://localhost:3003",
      dashboardFrameAncestors: [],
      apiKeyCacheTtlMs: 5_000,
      endpointQuotas: { maxEndpoints: 50, maxAuthEndpoints: 10 },
      maxStorageBytesPerWorld: 10 * 1024 ** 3,
      authThrottle: { maxFailures: 20, windowMs: 60_000 },
      trustProxy: false,
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
      ENDPOINT_URL_POLICY: "any",
      SECRETS_ENCRYPTION_KEY: `${KEY_B},${KEY_A}`,
      REDIS_URL: "redis://redis.internal:6380/3",
      REDIS_KEY_PREFIX: "vw-staging",
      DELIVERY_TIMEOUT_MS: "2500",
      MAX_ENDPOINTS_PER_WORLD: "200",
      MAX_AUTH_ENDPOINTS_PER_WORLD: "3",
      AUTH_FAILURES_MAX: "5",
      AUTH_FAILURES_WINDOW_S: "600",
      TRUST_PROXY: "1",
    });
    expect(config).toMatchObject({
      endpointQuotas: { maxEndpoints: 200, maxAuthEndpoints: 3 },
      authThrottle: { maxFailures: 5, windowMs: 600_000 },
      trustProxy: 1,
      port: 8080,
      logLevel: "debug",
      publicMapStorageUrl: "https://maps.example.com",
      playUrl: "https://play.example.com",
      endpointUrlPolicy: "any",
      secretsEncryptionKey: `${KEY_B},${KEY_A}`,
      // The database number stays in the URL; ioredis selects it.
      redis: { kind: "standalone", url: "redis://redis.internal:6380/3" },
      redisKeyPrefix: "vw-staging",
      deliveryTimeoutMs: 2500,
    });
  });

  it("refuses a REDIS_URL that is not redis(s), a DELIVERY_TIMEOUT_MS that is not a positive integer, a malformed REDIS_KEY_PREFIX", () => {
    expect(problemsOf({ ...valid, REDIS_URL: "http://127.0.0.1:6379" })).toEqual(['REDIS_URL must use redis: or rediss:, got "http:"']);
    expect(loadConfig({ ...valid, REDIS_URL: "rediss://cache.example.com:6380/0" }).redis).toEqual({ kind: "standalone", url: "rediss://cache.example.com:6380/0", password: null, tls: true });
    for (const value of ["0", "-5", "1.5", "soon"]) {
      const problems = problemsOf({ ...valid, DELIVERY_TIMEOUT_MS: value });
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/^DELIVERY_TIMEOUT_MS must be/);
    }
    expect(loadConfig({ ...valid, DELIVERY_TIMEOUT_MS: "1" }).deliveryTimeoutMs).toBe(1);
    expect(problemsOf({ ...valid, REDIS_KEY_PREFIX: "vw prod" })).toEqual([`REDIS_KEY_PREFIX must be 1-64 letters, digits, '_', '.', ':' or '-', got "vw prod"`]);
    expect(problemsOf({ ...valid, REDIS_KEY_PREFIX: "x".repeat(65) })).toHaveLength(1);
  });

  it("names a missing DATABASE_URL, ADMIN_TOKEN and SECRETS_ENCRYPTION_KEY", () => {
    expect(problemsOf({})).toEqual(["ADMIN_TOKEN is required", "SECRETS_ENCRYPTION_KEY is required", "DATABASE_URL is required"]);
  });

  it("refuses an ENDPOINT_URL_POLICY other than public-https or any", () => {
    expect(problemsOf({ ...valid, ENDPOINT_URL_POLICY: "public" })).toEqual(['ENDPOINT_URL_POLICY must be one of public-https, any, got "public"']);
    expect(loadConfig({ ...valid, ENDPOINT_URL_POLICY: "public-https" }).endpointUrlPolicy).toBe("public-https");
  });

  it("refuses a SECRETS_ENCRYPTION_KEY that is not base64 of 32 bytes, naming the key's position, never its value", () => {
    const short = Buffer.alloc(16, 7).toString("base64");
    for (const [value, position] of [
      [short, "#1"],
      ["not base64!", "#1"],
      [`${KEY_A},${short}`, "#2"],
    ] as const) {
      const problems = problemsOf({ ...valid, SECRETS_ENCRYPTION_KEY: value });
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(new RegExp(`^SECRETS_ENCRYPTION_KEY: .*${position}.*openssl rand -base64 32`));
      expect(problems[0]).not.toContain(short);
    }
    expect(problemsOf({ ...valid, SECRETS_ENCRYPTION_KEY: `${KEY_A},${KEY_A}` })[0]).toMatch(/^SECRETS_ENCRYPTION_KEY: .*listed twice/);
  });

  it.each([
    ["short-secret", /^ADMIN_TOKEN must be at least 32 characters long, got 12/],
    ["aaaaaaaaaaaaaaaa", /^ADMIN_TOKEN must be at least 32 characters long, got 16/],
    ["a".repeat(40), /^ADMIN_TOKEN has only 1 distinct characters/],
    ["0123456789".repeat(4), /^ADMIN_TOKEN repeats one 10-character pattern/],
  ])("refuses a weak ADMIN_TOKEN (%s) without echoing it", (token, reason) => {
    const problems = problemsOf({ ...valid, ADMIN_TOKEN: token });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(reason);
    expect(problems.join("\n")).not.toContain(token.slice(0, 10));
  });

  it("accepts a random ADMIN_TOKEN of exactly 32 characters", () => {
    expect(loadConfig({ ...valid, ADMIN_TOKEN: "x9K2mQ7vL4pR8tN1wZ6cB3hJ5fD0gS7e" }).adminToken).toBe("x9K2mQ7vL4pR8tN1wZ6cB3hJ5fD0gS7e");
  });

  it("refuses an all-zero SECRETS_ENCRYPTION_KEY, naming the variable", () => {
    expect(problemsOf({ ...valid, SECRETS_ENCRYPTION_KEY: Buffer.alloc(32).toString("base64") })).toEqual([
      expect.stringMatching(/^SECRETS_ENCRYPTION_KEY: encryption key #1 is one byte repeated \(all zeros\)/),
    ]);
  });

  it("refuses quotas below 1 and a TRUST_PROXY of true", () => {
    expect(problemsOf({ ...valid, MAX_ENDPOINTS_PER_WORLD: "0" })).toEqual(["MAX_ENDPOINTS_PER_WORLD must be between 1 and 100000, got 0"]);
    expect(problemsOf({ ...valid, MAX_AUTH_ENDPOINTS_PER_WORLD: "-1" })).toEqual(["MAX_AUTH_ENDPOINTS_PER_WORLD must be between 1 and 1000, got -1"]);
    expect(problemsOf({ ...valid, TRUST_PROXY: "true" })[0]).toMatch(/^TRUST_PROXY=true/);
  });

  it("names every malformed variable at once", () => {
    const problems = problemsOf({
      DATABASE_URL: "mysql://localhost/vw",
      ADMIN_TOKEN: valid.ADMIN_TOKEN,
      PORT: "http",
      LOG_LEVEL: "loud",
      PUBLIC_MAP_STORAGE_URL: "not a url",
      PLAY_URL: "ftp://play.example.com",
      ENDPOINT_URL_POLICY: "none",
      SECRETS_ENCRYPTION_KEY: "c2hvcnQ=",
    });
    expect(problems).toHaveLength(7);
    for (const name of ["PORT", "LOG_LEVEL", "DATABASE_URL", "PUBLIC_MAP_STORAGE_URL", "PLAY_URL", "ENDPOINT_URL_POLICY"]) {
      expect(problems.some((p) => p.startsWith(`${name} `))).toBe(true);
    }
    expect(problems.some((p) => p.startsWith("SECRETS_ENCRYPTION_KEY: "))).toBe(true);
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

  it("refuses a port out of range", () => {
    expect(problemsOf({ ...valid, PORT: "70000" })).toEqual(["PORT must be between 0 and 65535, got 70000"]);
  });

  it("reads DASHBOARD_FRAME_ANCESTORS as a list of origins and refuses anything else", () => {
    const config = loadConfig({ ...valid, DASHBOARD_FRAME_ANCESTORS: "  https://App.example.com/ https://*.example.org http://localhost:5173 " });
    expect(config.dashboardFrameAncestors).toEqual(["https://app.example.com", "https://*.example.org", "http://localhost:5173"]);
    expect(problemsOf({ ...valid, DASHBOARD_FRAME_ANCESTORS: "https://a.example.com/path" })).toEqual([
      expect.stringContaining('DASHBOARD_FRAME_ANCESTORS must be space-separated origins such as https://app.example.com, got "https://a.example.com/path"'),
    ]);
    expect(problemsOf({ ...valid, DASHBOARD_FRAME_ANCESTORS: "*" })).toHaveLength(1);
    expect(problemsOf({ ...valid, DASHBOARD_FRAME_ANCESTORS: "'self'" })).toHaveLength(1);
    expect(problemsOf({ ...valid, DASHBOARD_FRAME_ANCESTORS: "https://a.example.com; script-src *" })).toHaveLength(3);
  });

  it("reads API_KEY_CACHE_TTL_MS from 0 (no cache) to 60000 and refuses anything else", () => {
    expect(loadConfig({ ...valid, API_KEY_CACHE_TTL_MS: "0" }).apiKeyCacheTtlMs).toBe(0);
    expect(loadConfig({ ...valid, API_KEY_CACHE_TTL_MS: "60000" }).apiKeyCacheTtlMs).toBe(60_000);
    for (const bad of ["-1", "60001", "5s", "1.5"]) expect(problemsOf({ ...valid, API_KEY_CACHE_TTL_MS: bad }).join("\n")).toContain("API_KEY_CACHE_TTL_MS");
  });

  it("reads PUBLIC_ADMIN_URL as an http(s) origin and refuses a path, query, fragment or credentials", () => {
    expect(loadConfig({ ...valid, PUBLIC_ADMIN_URL: "https://admin.example.com/" }).publicAdminUrl).toBe("https://admin.example.com");
    expect(loadConfig({ ...valid, PUBLIC_ADMIN_URL: "HTTPS://Admin.Example.com:443" }).publicAdminUrl).toBe("https://admin.example.com");
    expect(problemsOf({ ...valid, PUBLIC_ADMIN_URL: "ftp://admin.example.com" })).toEqual([expect.stringContaining("PUBLIC_ADMIN_URL")]);
    for (const bad of ["https://example.com/admin", "https://example.com/?x=1", "https://example.com/#x", "https://user:secret@example.com"]) {
      const problems = problemsOf({ ...valid, PUBLIC_ADMIN_URL: bad });
      expect(problems).toEqual([expect.stringContaining("PUBLIC_ADMIN_URL must be an origin")]);
      expect(problems.join()).not.toContain("secret");
    }
  });

  it("sends the Test action through DELIVERY_PROXY_URL when set, its credentials as Proxy-Authorization", () => {
    expect(loadConfig(valid).deliveryProxy).toBeNull();
    const { deliveryProxy } = loadConfig({ ...valid, DELIVERY_PROXY_URL: "http://tests:pa%24%24@10.0.0.5:8888" });
    expect(deliveryProxy).toEqual({ host: "10.0.0.5", port: 8888, authorization: `Basic ${Buffer.from("tests:pa$$").toString("base64")}`, address: "10.0.0.5:8888" });
    const problems = problemsOf({ ...valid, DELIVERY_PROXY_URL: "socks5://tests:pa%24%24@10.0.0.5:1080" });
    expect(problems).toEqual(["DELIVERY_PROXY_URL must be http://[user:password@]host:port (the scheme is socks5, only http is supported)"]);
  });
});
