/**
 * The shard layouts' registry and their clearing, on the three topologies of the run: a layout
 * announced is recorded and in use; a retired layout's keys (BullMQ's, the index markers) are all
 * deleted, on whichever Cluster primary holds each shard, and another layout's are left alone.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Cluster, Redis } from "ioredis";
import { parseEnv, readRedisTopology } from "@vw/service-kit";
import { deleteKeysUnder, redisReady, testKeyPrefix, testRedisEnv } from "@vw/testing";
import { announceLayout, clearLayout, layoutInUse, layoutsKey, openDeliveryQueues, otherLayouts, retireLayout } from "./delivery-shards.js";
import { markIndexed, markRebuilding } from "./dispatch-index.js";
import { createRedisConnection, type RedisClient } from "./redis-connection.js";

describe.each(["standalone", "sentinel", "cluster"] as const)("on %s", (topology) => {
  let redis: RedisClient;
  const keyPrefix = testKeyPrefix("layouts-");

  beforeAll(async () => {
    redis = createRedisConnection(parseEnv(testRedisEnv(topology), readRedisTopology), "worker");
    await redisReady(redis);
  });
  afterAll(async () => {
    if (redis) {
      await deleteKeysUnder(redis, `${keyPrefix}:`);
      await redis.quit();
    }
  });

  /** Every key of the layout of `shards`, on every node that may hold one. */
  const keysOfLayout = async (shards: number): Promise<string[]> => {
    const nodes = redis.isCluster ? (redis as Cluster).nodes("master") : [redis as Redis];
    const keys: string[] = [];
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, found] = await node.scan(cursor, "MATCH", `${keyPrefix}:bull:{dlv${shards}.*`, "COUNT", 1000);
        cursor = next;
        keys.push(...found);
      } while (cursor !== "0");
    }
    return keys;
  };

  it("records an announced layout as in use, and lists the others", async () => {
    await announceLayout(redis, keyPrefix, 4);
    await announceLayout(redis, keyPrefix, 8);
    expect(await layoutInUse(redis, keyPrefix, 4)).toBe(true);
    expect(await layoutInUse(redis, keyPrefix, 2)).toBe(false);
    expect(await otherLayouts(redis, keyPrefix, 8)).toEqual([4]);
    await retireLayout(redis, keyPrefix, 4);
    expect(await redis.smembers(layoutsKey(keyPrefix))).toEqual(["8"]);
  });

  it("deletes every key of a retired layout's shards, and none of another layout's", async () => {
    const retired = openDeliveryQueues(redis, keyPrefix, 4);
    const kept = openDeliveryQueues(redis, keyPrefix, 2);
    try {
      for (const q of [...retired.shards, ...kept.shards]) {
        await q.add("x", {}, { removeOnComplete: false });
        await markIndexed(redis, q, await markRebuilding(redis, q));
      }
      expect((await keysOfLayout(4)).length).toBeGreaterThan(4);
      const keptBefore = (await keysOfLayout(2)).sort();
      await clearLayout(redis, retired);
      expect(await keysOfLayout(4)).toEqual([]);
      expect((await keysOfLayout(2)).sort()).toEqual(keptBefore);
    } finally {
      await retired.close();
      await kept.close();
    }
  });
});
