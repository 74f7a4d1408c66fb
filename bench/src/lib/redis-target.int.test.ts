/**
 * The benchmarks' Redis: the topology the environment names (as every service reads it), the
 * variables passed on to the services a benchmark starts, the refusal of a benchmark that reads
 * one Redis's statistics, and the clean-up of a benchmark's keys on the run's Redis and on every
 * primary of a private Cluster (packages/testing).
 */
import { describe, expect, it } from "@jest/globals";
import { Redis } from "ioredis";
import { redisCommand, startRedisCluster, testKeyPrefix } from "@vw/testing";
import { benchRedisEnv, benchRedisMode, benchRedisTopology, deleteKeysUnder, standaloneRedisUrl } from "./redis-target.js";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

describe("the benchmarks' Redis", () => {
  it("passes the topology of the environment on to the services, REDIS_URL by default", () => {
    expect(benchRedisEnv({})).toEqual({ REDIS_URL: "redis://127.0.0.1:6379" });
    expect(benchRedisEnv({ REDIS_URL: "redis://r:6379/2", PATH: "/bin" })).toEqual({ REDIS_URL: "redis://r:6379/2" });
    expect(benchRedisEnv({ REDIS_CLUSTER_NODES: "a:7000,b:7001", REDIS_PASSWORD: "pw", REDIS_URL: "" })).toEqual({ REDIS_CLUSTER_NODES: "a:7000,b:7001", REDIS_PASSWORD: "pw" });
    expect(benchRedisTopology({ REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_MASTER: "m" })).toMatchObject({ kind: "sentinel", masterName: "m" });
    expect(() => benchRedisTopology({ REDIS_URL: "redis://r:6379", REDIS_CLUSTER_NODES: "a:7000" })).toThrow(/REDIS_URL and REDIS_CLUSTER_NODES/);
  });

  it("refuses a Sentinel or Cluster for a benchmark that reads one Redis's statistics", () => {
    expect(standaloneRedisUrl("delivery", { REDIS_URL: "redis://r:6379/1" })).toBe("redis://r:6379/1");
    expect(() => standaloneRedisUrl("delivery", { REDIS_CLUSTER_NODES: "a:7000" })).toThrow(/pnpm bench delivery .* REDIS_URL only/);
  });

  it("reads BENCH_REDIS: the environment's Redis by default, a Cluster of its own for the benchmarks that compare one", () => {
    expect(benchRedisMode("delivery", {})).toBe("environment");
    expect(benchRedisMode("delivery", { BENCH_REDIS: "cluster" })).toBe("cluster");
    expect(() => benchRedisMode("delivery", { BENCH_REDIS: "sentinel" })).toThrow(/BENCH_REDIS must be unset or "cluster", got "sentinel"/);
    expect(() => benchRedisMode("history", { BENCH_REDIS: "cluster" })).toThrow(/pnpm bench history does not start a Cluster of its own/);
  });

  it("deletes a benchmark's keys, and only those, on the run's Redis", async () => {
    const prefix = testKeyPrefix("bench-target-");
    const redis = new Redis(REDIS_URL);
    try {
      await redis.mset(`${prefix}:a`, "1", `${prefix}:b`, "2", `${prefix}-other:c`, "3");
      await deleteKeysUnder(REDIS_URL, `${prefix}:`);
      expect(await redis.exists(`${prefix}:a`, `${prefix}:b`, `${prefix}-other:c`)).toBe(1);
      await redis.del(`${prefix}-other:c`);
    } finally {
      await redis.quit();
    }
  });

  it("deletes a benchmark's keys on every primary of a Cluster", async () => {
    const cluster = await startRedisCluster({ primaries: 3, replicasPerPrimary: 0 });
    try {
      const keys = Array.from({ length: 30 }, (_, i) => `bench:k${i}`);
      const owners = await Promise.all(keys.map((key) => cluster.primaryForKey(key)));
      for (const [i, key] of keys.entries()) await redisCommand(owners[i]!.port, ["SET", key, "v"]);
      await redisCommand((await cluster.primaryForKey("{kept}:x")).port, ["SET", "{kept}:x", "v"]);
      expect(new Set(owners.map((o) => o.port)).size).toBe(3);
      await deleteKeysUnder({ kind: "cluster", nodes: cluster.nodes, password: null, tls: false }, "bench:");
      const left = await Promise.all((await cluster.primaries()).map(async (p) => Number(await redisCommand(p.port, ["DBSIZE"]))));
      expect(left.reduce((a, b) => a + b, 0)).toBe(1);
    } finally {
      await cluster.stop();
    }
  }, 90_000);
});
