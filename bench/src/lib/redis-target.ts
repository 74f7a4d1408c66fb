/**
 * The Redis a benchmark runs on, read as the services read it: one topology from the environment
 * (REDIS_URL, which scripts/bench.mjs sets unless REDIS_SENTINELS or REDIS_CLUSTER_NODES is
 * given; the passwords and REDIS_TLS beside them). The services a benchmark starts get the same
 * variables, and its own connections (key clean-up, queue handles) are built from the same
 * topology, so a benchmark never measures one Redis while its services use another.
 */
import { createRedisConnection } from "@vw/queues";
import { deleteKeysUnder as deleteKeysOf, redisReady } from "@vw/testing";
import { DEFAULT_REDIS_URL, REDIS_TOPOLOGY_VARIABLES, parseEnv, readRedisTopology, type Env, type RedisTopology } from "@vw/service-kit";

/** The topology in `env` (the process environment by default); throws naming the variables when it is not one. */
export function benchRedisTopology(env: Env = process.env): RedisTopology {
  return parseEnv(env, (r) => ({ topology: readRedisTopology(r) })).topology;
}

/** The Redis variables of `env` that are set, for the services a benchmark starts (REDIS_URL by default). */
export function benchRedisEnv(env: Env = process.env): Record<string, string> {
  const set = REDIS_TOPOLOGY_VARIABLES.flatMap((name) => {
    const value = env[name];
    return value === undefined || value === "" ? [] : [[name, value] as const];
  });
  const topology = new Set<string>(["REDIS_URL", "REDIS_SENTINELS", "REDIS_CLUSTER_NODES"]);
  const chosen = set.some(([name]) => topology.has(name));
  return Object.fromEntries(chosen ? set : [["REDIS_URL", DEFAULT_REDIS_URL], ...set]);
}

/**
 * Deletes every key under `prefix` (a benchmark's own keys, at its end) on the Redis of `target`
 * (a URL or a topology): on a Cluster, on every primary.
 */
export async function deleteKeysUnder(target: string | RedisTopology, prefix: string): Promise<void> {
  const redis = createRedisConnection(target, "producer");
  try {
    await redisReady(redis);
    await deleteKeysOf(redis, prefix);
  } finally {
    await redis.quit();
  }
}

/**
 * REDIS_URL of the environment, for a benchmark that reads one Redis's own statistics (`INFO
 * commandstats`, its CPU): it refuses a Sentinel or Cluster topology by name instead of measuring
 * a Redis its services do not use.
 */
export function standaloneRedisUrl(benchmark: string, env: Env = process.env): string {
  const topology = benchRedisTopology(env);
  if (topology.kind !== "standalone") {
    throw new Error(`pnpm bench ${benchmark} measures one Redis's statistics and runs on REDIS_URL only; unset REDIS_SENTINELS and REDIS_CLUSTER_NODES`);
  }
  return topology.url;
}

/** Benchmarks that compare a Redis Cluster they start themselves with a standalone Redis (`BENCH_REDIS=cluster`). */
export const CLUSTER_BENCHMARKS: readonly string[] = ["delivery"];

/**
 * BENCH_REDIS: unset for the Redis the environment names, `cluster` for a benchmark of
 * {@link CLUSTER_BENCHMARKS} to start a Redis Cluster and a standalone Redis of its own and compare
 * them in one run. Anything else, or `cluster` for another benchmark, throws naming the variable.
 */
export function benchRedisMode(benchmark: string, env: Env = process.env): "environment" | "cluster" {
  const value = env.BENCH_REDIS;
  if (value === undefined || value === "") return "environment";
  if (value !== "cluster") throw new Error(`BENCH_REDIS must be unset or "cluster", got "${value}"`);
  if (!CLUSTER_BENCHMARKS.includes(benchmark)) {
    throw new Error(`BENCH_REDIS=cluster: pnpm bench ${benchmark} does not start a Cluster of its own (${CLUSTER_BENCHMARKS.map((b) => `pnpm bench ${b}`).join(", ")} does)`);
  }
  return "cluster";
}
