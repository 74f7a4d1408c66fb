/**
 * The failed-authentication throttle on a Redis Cluster (a private one of packages/testing, never
 * the machine's Redis): each counter is one key and each script touches only it, so clients whose
 * counters live on different primaries are all counted there and shared by two replicas. A script
 * over keys of different slots would be refused (CROSSSLOT) and the throttle would quietly count
 * in memory instead: the test also asserts that it never fell back.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Cluster } from "ioredis";
import { startRedisCluster, testKeyPrefix, type PrivateRedisCluster } from "@vw/testing";
import { AuthThrottle } from "./auth-throttle.js";
import { AppError } from "./errors.js";
import type { Logger } from "./logger.js";

const prefix = testKeyPrefix("throttle-cluster-");
const SECRET = "the-right-credential";
let cluster: PrivateRedisCluster;
let client: Cluster;

interface Line {
  level: string;
  msg: unknown;
}
function recordingLogger(lines: Line[]): Logger {
  const record = (level: string) => (_fields: unknown, msg?: unknown) => void lines.push({ level, msg });
  const logger = { trace: record("trace"), debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error"), fatal: record("fatal"), child: () => logger };
  return logger as unknown as Logger;
}

/** The status a guarded check ends with: 200 for a pass, else the AppError's status. */
async function attempt(throttle: AuthThrottle, address: string, presented: string): Promise<number> {
  try {
    await throttle.guard(address, () => {
      if (presented !== SECRET) throw new AppError(401, "invalid-token", "wrong");
      return "ok";
    });
    return 200;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    return err.status;
  }
}

beforeAll(async () => {
  cluster = await startRedisCluster({ primaries: 3, replicasPerPrimary: 0 });
  client = new Cluster(cluster.nodes.map(({ host, port }) => ({ host, port })), { scaleReads: "master" });
}, 90_000);
afterAll(async () => {
  await client?.quit();
  await cluster?.stop();
});

describe("AuthThrottle on a Redis Cluster", () => {
  it("counts each client's failures on the primary of its key, shares them between replicas, and never falls back to memory", async () => {
    const lines: Line[] = [];
    // A generous command timeout: what is checked is where the cluster counts, and on a busy machine
    // the first commands to a cluster just started (slot map, connections) can take longer than
    // the default 500 ms, after which a failure is counted in memory only (the fallback, tested in
    // auth-throttle's own tests).
    const replica = () =>
      new AuthThrottle({ redis: client, keyPrefix: `${prefix}:`, scope: "api-key", maxFailures: 3, windowMs: 60_000, redisTimeoutMs: 30_000, logger: recordingLogger(lines) });
    const [a, b] = [replica(), replica()];
    const addresses = Array.from({ length: 12 }, (_, i) => `198.51.100.${i + 1}`);
    for (const address of addresses) {
      expect([address, await attempt(a, address, "guess-1"), await attempt(b, address, "guess-2"), await attempt(a, address, "guess-3")]).toEqual([address, 401, 401, 401]);
    }
    // The limit was reached through both replicas: each now refuses the right credential too.
    for (const address of addresses) expect([address, await attempt(b, address, SECRET), await attempt(a, address, SECRET)]).toEqual([address, 429, 429]);
    // A client that never failed passes on both.
    expect([await attempt(a, "192.0.2.9", SECRET), await attempt(b, "192.0.2.9", SECRET)]).toEqual([200, 200]);

    expect(lines.filter((l) => l.level === "warn" && String(l.msg).includes("Redis unavailable"))).toEqual([]);
    const keys = addresses.map((address) => `${prefix}:auth-failures:api-key:${address}`);
    for (const key of keys) {
      expect([key, await client.hget(key, "failures")]).toEqual([key, "3"]);
      expect(await client.pttl(key)).toBeGreaterThan(50_000);
    }
    // The counters are spread over the primaries, so the scripts ran on more than one of them.
    const owners = new Set(await Promise.all(keys.map(async (key) => (await cluster.primaryForKey(key)).port)));
    expect(owners.size).toBeGreaterThan(1);
  }, 60_000);
});
