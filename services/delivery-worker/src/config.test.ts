import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "@vw/service-kit";
import { generateSecretBoxKey } from "@vw/webhook-core";
import { loadConfig } from "./config.js";

const base = { DATABASE_URL: "postgresql://db/vw", SECRETS_ENCRYPTION_KEY: generateSecretBoxKey() };

describe("delivery-worker config", () => {
  it("has the spec's defaults", () => {
    const config = loadConfig(base);
    expect(config).toMatchObject({
      port: 3004,
      deliveryTimeoutMs: 15_000,
      disableAfterFailures: 50,
      deliveryRetentionDays: 90,
      endpointUrlPolicy: "public-https",
      smtpUrl: null,
      deliveryConcurrency: 400,
      endpointConcurrency: 10,
    });
    expect(config.retryDelays).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000]);
  });

  it("honours a Redis database number and a short retry schedule", () => {
    const config = loadConfig({ ...base, REDIS_URL: "redis://cache:6379/3", RETRY_DELAYS: "100ms,1s" });
    expect(config.redis).toEqual({ kind: "standalone", url: "redis://cache:6379/3", password: null, tls: false });
    expect(config.retryDelays).toEqual([100, 1000]);
  });

  it("reads a Sentinel or Cluster topology, and refuses two at once naming both", () => {
    expect(loadConfig({ ...base, REDIS_SENTINELS: "s0:26379", REDIS_SENTINEL_MASTER: "vw" }).redis).toMatchObject({ kind: "sentinel", masterName: "vw" });
    expect(loadConfig({ ...base, REDIS_CLUSTER_NODES: "c0:6379,c1:6379" }).redis).toMatchObject({ kind: "cluster", nodes: [{ host: "c0", port: 6379 }, { host: "c1", port: 6379 }] });
    expect(() => loadConfig({ ...base, REDIS_SENTINELS: "s0:26379", REDIS_SENTINEL_MASTER: "vw", REDIS_CLUSTER_NODES: "c0:6379" })).toThrow(/REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set/);
  });

  it("names every bad variable, never echoing the encryption key", () => {
    let error: unknown;
    try {
      loadConfig({ DATABASE_URL: "mysql://x", SECRETS_ENCRYPTION_KEY: "not-a-key", RETRY_DELAYS: "1s,2s,3s,4s,5s,6s,7s,8s,9s,10s", SMTP_URL: "http://mail" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of ["DATABASE_URL", "SECRETS_ENCRYPTION_KEY", "RETRY_DELAYS", "SMTP_URL"]) expect(message).toContain(name);
    expect(message).not.toContain("not-a-key");
  });
});

/** The problems a configuration is refused with (fails the test when it is accepted). */
function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig({ ...base, ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe("REDIS_KEY_PREFIX", () => {
  it("defaults to vw (event-ingest's and admin-api's) and reads another one", () => {
    expect(loadConfig(base).redisKeyPrefix).toBe("vw");
    expect(loadConfig({ ...base, REDIS_KEY_PREFIX: "vw:staging:" }).redisKeyPrefix).toBe("vw:staging:");
  });

  it("refuses what event-ingest and admin-api refuse, with their message", () => {
    expect(problemsOf({ REDIS_KEY_PREFIX: "vw prod" })).toEqual([`REDIS_KEY_PREFIX must be 1-64 letters, digits, '_', '.', ':' or '-', got "vw prod"`]);
    expect(problemsOf({ REDIS_KEY_PREFIX: "x".repeat(65) })).toHaveLength(1);
  });
});

describe("analytics flush and PLAY_URL", () => {
  it("defaults to a flush every 20 s (3 batches per endpoint per minute), 100 events per batch, https://play.localhost", () => {
    expect(loadConfig(base)).toMatchObject({ analyticsFlushIntervalMs: 20_000, analyticsBatchMax: 100, playUrl: "https://play.localhost" });
  });

  it.each([
    [{ ANALYTICS_FLUSH_INTERVAL_MS: "1000" }, { analyticsFlushIntervalMs: 1000 }],
    [{ ANALYTICS_FLUSH_INTERVAL_MS: " 3600000 " }, { analyticsFlushIntervalMs: 3_600_000 }],
    [{ ANALYTICS_BATCH_MAX: "1" }, { analyticsBatchMax: 1 }],
    [{ ANALYTICS_BATCH_MAX: "100" }, { analyticsBatchMax: 100 }],
    [{ PLAY_URL: "https://play.example.com/" }, { playUrl: "https://play.example.com" }],
    [{ PLAY_URL: "http://localhost:8080/play" }, { playUrl: "http://localhost:8080/play" }],
  ])("accepts %j", (env, expected) => {
    expect(loadConfig({ ...base, ...env })).toMatchObject(expected);
  });

  it.each([
    [{ ANALYTICS_FLUSH_INTERVAL_MS: "999" }, "ANALYTICS_FLUSH_INTERVAL_MS must be between 1000 and 3600000, got 999"],
    [{ ANALYTICS_FLUSH_INTERVAL_MS: "3600001" }, "ANALYTICS_FLUSH_INTERVAL_MS must be between 1000 and 3600000, got 3600001"],
    [{ ANALYTICS_FLUSH_INTERVAL_MS: "99999999999999999999999" }, "ANALYTICS_FLUSH_INTERVAL_MS must be between 1000 and 3600000, got 1e+23"],
    [{ ANALYTICS_FLUSH_INTERVAL_MS: "20s" }, 'ANALYTICS_FLUSH_INTERVAL_MS must be an integer, got "20s"'],
    [{ ANALYTICS_FLUSH_INTERVAL_MS: "-5000" }, "ANALYTICS_FLUSH_INTERVAL_MS must be between 1000 and 3600000, got -5000"],
    [{ ANALYTICS_BATCH_MAX: "0" }, "ANALYTICS_BATCH_MAX must be between 1 and 100, got 0"],
    [{ ANALYTICS_BATCH_MAX: "101" }, "ANALYTICS_BATCH_MAX must be between 1 and 100, got 101"],
    [{ ANALYTICS_BATCH_MAX: "2.5" }, 'ANALYTICS_BATCH_MAX must be an integer, got "2.5"'],
    [{ PLAY_URL: "play.example.com" }, 'PLAY_URL must be a URL, got "play.example.com"'],
    [{ PLAY_URL: "ftp://play.example.com" }, 'PLAY_URL must use http: or https:, got "ftp:"'],
    [{ PLAY_URL: "https://play.example.com/?ref=mail" }, `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com/?ref=mail"`],
    [{ PLAY_URL: "https://play.example.com#lobby" }, `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com#lobby"`],
    [{ PLAY_URL: "https://play.example.com?" }, `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com?"`],
  ])("refuses %j, saying why", (env, message) => {
    expect(problemsOf(env)).toEqual([message]);
  });

  it("refuses a PLAY_URL with credentials without echoing them", () => {
    const problems = problemsOf({ PLAY_URL: "https://ops:hunter2@play.example.com/?x=1" });
    expect(problems).toEqual(["PLAY_URL must not contain credentials (it is sent in every analytics.batch envelope)"]);
    expect(problems.join("\n")).not.toContain("hunter2");
  });

  it("sends deliveries through DELIVERY_PROXY_URL when set; a malformed one is named, its password never repeated", () => {
    expect(loadConfig(base).deliveryProxy).toBeNull();
    expect(loadConfig({ ...base, DELIVERY_PROXY_URL: "http://[fd00::3]:3128" }).deliveryProxy).toMatchObject({ host: "fd00::3", port: 3128, address: "[fd00::3]:3128" });
    const problems = problemsOf({ DELIVERY_PROXY_URL: "http://worker:hunter2@egress:3128/path" });
    expect(problems).toEqual(["DELIVERY_PROXY_URL must be http://[user:password@]host:port (no path, query or fragment)"]);
    expect(problems.join()).not.toContain("hunter2");
  });
});
