/**
 * The endpoint scheduler's store on the run's Sentinel group and 3-primary Cluster
 * (packages/testing test-topologies.ts), driven directly on shard queues of a 16-shard layout:
 * an endpoint's window granted and refused, its backlog parked and a freed slot handed to the
 * oldest parked job, the throttle's reserved starts, and the sweep taking back an expired lease.
 * Every script names keys of the endpoint's shard only; on the Cluster one that reached a key of
 * another slot would fail here with CROSSSLOT. delivery-worker's endpoint-scheduler tests cover
 * the store in depth on the standalone Redis.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Queue } from "bullmq";
import { parseEnv, readRedisTopology } from "@vw/service-kit";
import { HA_TEST_TOPOLOGIES, deleteKeysUnder, eventually, redisReady, testKeyPrefix, testRedisEnv } from "@vw/testing";
import { JOB_NAMES } from "./catalogue.js";
import { openDeliveryQueues, type DeliveryQueues } from "./delivery-shards.js";
import { EndpointScheduler } from "./endpoint-scheduler.js";
import { keySlot } from "./key-slots.js";
import { createRedisConnection, type RedisClient } from "./redis-connection.js";

describe.each(HA_TEST_TOPOLOGIES)("on %s", (topology) => {
  let redis: RedisClient;
  let queues: DeliveryQueues;
  const keyPrefix = testKeyPrefix("sched-");

  beforeAll(async () => {
    redis = createRedisConnection(parseEnv(testRedisEnv(topology), readRedisTopology), "worker");
    await redisReady(redis);
    queues = openDeliveryQueues(redis, keyPrefix, 16);
  });
  afterAll(async () => {
    await queues?.close();
    if (redis) {
      await deleteKeysUnder(redis, `${keyPrefix}:`);
      await redis.quit();
    }
  });

  /** Endpoint ids in `n` different shards. */
  const endpointsInShards = (n: number): string[] => {
    const byShard = new Map<number, string>();
    while (byShard.size < n) {
      const id = randomUUID();
      byShard.set(queues.shardOf(id), id);
    }
    return [...byShard.values()];
  };

  /** Adds a deliver job straight into the delayed set of `queue`, as the worker does before parking it. */
  async function delayedJob(queue: Queue, endpointId: string): Promise<string> {
    const id = randomUUID();
    await queue.add(JOB_NAMES.deliver, { deliveryId: id, endpointId, run: 0 }, { jobId: id, delay: 3_600_000 });
    return id;
  }

  it("grants an endpoint's window, parks its backlog and hands a freed slot to the oldest parked job, in the endpoint's shard", async () => {
    for (const endpoint of endpointsInShards(2)) {
      const queue = queues.queueFor(endpoint);
      const scheduler = await EndpointScheduler.forQueue(queue, { maxWindow: 2 });
      expect(keySlot(`${scheduler.base}ep:${endpoint}:parked`)).toBe(keySlot(`${queue.qualifiedName}:delayed`));

      expect(await scheduler.acquire(endpoint, "holder-1", "t")).toMatchObject({ granted: true });
      expect(await scheduler.acquire(endpoint, "holder-2", "t")).toMatchObject({ granted: true });
      expect(await scheduler.acquire(endpoint, "holder-3", "t")).toMatchObject({ granted: false, backlogged: false });
      const parked = [await delayedJob(queue, endpoint), await delayedJob(queue, endpoint)];
      await scheduler.park(endpoint, parked);
      expect([...(await scheduler.congested([endpoint, randomUUID()]))]).toEqual([endpoint]);
      expect(await scheduler.stats()).toMatchObject({ backloggedEndpoints: 1, parkedJobs: 2 });

      await scheduler.release(endpoint, "holder-1", "t", "answered");
      expect(await queue.getJobState(parked[0]!)).toBe("waiting");
      expect(await queue.getJobState(parked[1]!)).toBe("delayed");
      // The promoted job's reservation is its slot: no other job takes it meanwhile.
      expect(await scheduler.acquire(endpoint, "intruder", "t")).toMatchObject({ granted: false, backlogged: true });
      expect(await scheduler.acquire(endpoint, parked[0]!, "t")).toMatchObject({ granted: true });
      expect(await scheduler.inUse(endpoint)).toBe(2);

      await scheduler.release(endpoint, "holder-2", "t", "answered");
      await scheduler.release(endpoint, parked[0]!, "t", "answered");
      expect(await queue.getJobState(parked[1]!)).toBe("waiting");
      expect(await scheduler.acquire(endpoint, parked[1]!, "t")).toMatchObject({ granted: true });
      await scheduler.release(endpoint, parked[1]!, "t", "answered");
      expect(await scheduler.stats()).toMatchObject({ backloggedEndpoints: 0, parkedJobs: 0 });
      expect(await scheduler.inUse(endpoint)).toBe(0);
    }
  });

  it("reserves throttled starts 1000 / rate ms apart, and forgets the rate when it is removed", async () => {
    const [endpoint] = endpointsInShards(1);
    const scheduler = await EndpointScheduler.forQueue(queues.queueFor(endpoint!));
    expect(await scheduler.acquire(endpoint!, "a", "t")).toMatchObject({ granted: true });
    expect(await scheduler.acquire(endpoint!, "b", "t")).toMatchObject({ granted: true });
    expect(await scheduler.throttle(endpoint!, "a", "t", 2)).toBe(0);
    const wait = await scheduler.throttle(endpoint!, "b", "t", 2);
    // The second start is reserved 500 ms after the first, less the time between the two calls.
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(500);
    expect(await scheduler.throttle(endpoint!, "b", "t", null)).toBe(0);
    await scheduler.release(endpoint!, "a", "t", "answered");
    await scheduler.release(endpoint!, "b", "t", "answered");
  });

  it("the sweep takes back an expired lease and promotes a parked job into it", async () => {
    const [endpoint] = endpointsInShards(1);
    const queue = queues.queueFor(endpoint!);
    const scheduler = await EndpointScheduler.forQueue(queue, { maxWindow: 1, leaseTtlMs: 200 });
    expect(await scheduler.acquire(endpoint!, "doomed", "t")).toMatchObject({ granted: true });
    const parked = await delayedJob(queue, endpoint!);
    await scheduler.park(endpoint!, [parked]);
    await eventually("the sweep promotes the parked job once the lease expired", async () => (await scheduler.sweep()) === 1, { timeoutMs: 5000 });
    expect(await queue.getJobState(parked)).toBe("waiting");
    expect(await scheduler.acquire(endpoint!, parked, "t")).toMatchObject({ granted: true });
    await scheduler.release(endpoint!, parked, "t", "answered");
  });
});
