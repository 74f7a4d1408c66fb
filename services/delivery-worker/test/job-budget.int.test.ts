/**
 * One budget of jobs for every shard's BullMQ worker (src/job-budget.ts), against the real Redis:
 * with jobs waiting in every shard, the process never holds more jobs than its budget, and every
 * job is processed (no permit is lost or leaked, also across BullMQ's fetch-next path).
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, expect, it } from "@jest/globals";
import { Worker } from "bullmq";
import type { Redis } from "ioredis";
import { createRedisConnection, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { deleteKeysUnder, eventually, testKeyPrefix } from "@vw/testing";
import { JobBudget, shareJobBudget } from "../src/job-budget.js";

const SHARDS = 4;
const BUDGET = 3;
let redis: Redis;
let queues: DeliveryQueues;
/** Closed after each test, passed or not (a worker left running would keep jest alive). */
let running: Worker[] = [];
const prefix = testKeyPrefix("budget-");

beforeAll(() => {
  redis = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "worker");
  queues = openDeliveryQueues(redis, prefix, SHARDS);
});
afterEach(async () => {
  await Promise.all(running.map((w) => w.close()));
  running = [];
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
    running.push(worker);
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

it("shares the budget between shards: a shard that took all of it gives permits up when another shard has jobs", async () => {
  const budget = new JobBudget(16);
  const busy = queues.shards[0]!;
  const late = queues.shards[1]!;
  const started: string[] = [];
  let release = () => {};
  let gate = new Promise<void>((resolve) => (release = resolve));
  const workers = [busy, late].map((queue) => {
    const worker = new Worker(
      queue.name,
      async () => {
        started.push(queue.name + queue.opts.prefix!);
        await gate;
        await new Promise((resolve) => setTimeout(resolve, 2));
      },
      { connection: redis, prefix: queue.opts.prefix!, concurrency: 16, autorun: false },
    );
    shareJobBudget(worker, budget);
    running.push(worker);
    void worker.run();
    return worker;
  });
  const busyName = busy.name + busy.opts.prefix!;
  const lateName = late.name + late.opts.prefix!;
  const jobs = (n: number) => Array.from({ length: n }, () => ({ name: "job", data: {}, opts: { jobId: randomUUID() } }));
  await busy.addBulk(jobs(80));
  // The busy shard's worker holds the whole budget before the other shard has any job.
  await eventually("the busy shard holds the whole budget", () => started.length === 16 && budget.heldBy(workers[0]!) === 16);
  await late.addBulk(jobs(40));
  // Its worker woke to them and asks for a permit: only then can a permit go its way.
  await eventually("the other shard's worker waits for a permit", () => budget.isWaiting(workers[1]!));
  const before = started.length;
  release();
  // Jobs stop waiting from now on.
  gate = Promise.resolve();
  await eventually("twenty more jobs started", () => started.length >= before + 20, { timeoutMs: 20_000 });
  const next = started.slice(before, before + 20);
  // Without sharing, the busy shard would keep every permit until its 80 jobs ran out.
  expect(next.filter((name) => name === lateName).length).toBeGreaterThanOrEqual(5);
  expect(next.filter((name) => name === busyName).length).toBeGreaterThanOrEqual(5);
  await eventually("every job ran", () => started.length === 120, { timeoutMs: 20_000 });
  await Promise.all(workers.map((w) => w.close()));
  expect(budget.inUse).toBe(0);
});
