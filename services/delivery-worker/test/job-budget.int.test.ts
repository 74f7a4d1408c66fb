/**
 * One budget of jobs for every shard's BullMQ worker (src/job-budget.ts), against the real Redis:
 * with jobs waiting in every shard, the process never holds more jobs than its budget, and every
 * job is processed (no permit is lost or leaked, also across BullMQ's fetch-next path).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { Worker } from "bullmq";
import type { Redis } from "ioredis";
import { createRedisConnection, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { deleteKeysUnder, eventually, testKeyPrefix } from "@vw/testing";
import { JobBudget, shareJobBudget } from "../src/job-budget.js";

const SHARDS = 4;
const BUDGET = 3;
let redis: Redis;
let queues: DeliveryQueues;
const prefix = testKeyPrefix("budget-");

beforeAll(() => {
  redis = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "worker");
  queues = openDeliveryQueues(redis, prefix, SHARDS);
});
afterAll(async () => {
  await queues.close();
  await deleteKeysUnder(redis, `${prefix}:`);
  await redis.quit();
});

it("holds at most its budget of jobs across every shard's worker, and processes them all", async () => {
  const budget = new JobBudget(BUDGET);
  let inHand = 0;
  let most = 0;
  const done = new Set<string>();
  const workers = queues.shards.map((queue) => {
    const worker = new Worker(
      queue.name,
      async (job) => {
        inHand += 1;
        most = Math.max(most, inHand);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inHand -= 1;
        done.add(String(job.id));
      },
      { connection: redis, prefix: queue.opts.prefix!, concurrency: BUDGET, autorun: false },
    );
    shareJobBudget(worker, budget);
    void worker.run();
    return worker;
  });
  const ids: string[] = [];
  for (const queue of queues.shards) {
    const jobs = Array.from({ length: 15 }, () => ({ name: "job", data: {}, opts: { jobId: randomUUID() } }));
    ids.push(...jobs.map((j) => j.opts.jobId));
    await queue.addBulk(jobs);
  }
  await eventually("every job of every shard was processed", () => ids.every((id) => done.has(id)), { timeoutMs: 20_000 });
  expect(most).toBeLessThanOrEqual(BUDGET);
  expect(most).toBeGreaterThan(1);
  await Promise.all(workers.map((w) => w.close()));
  expect(budget.inUse).toBe(0);
});
