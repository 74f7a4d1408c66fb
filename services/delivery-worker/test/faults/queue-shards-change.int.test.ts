/**
 * Changes of QUEUE_SHARDS under load, rolled out as the delivery-worker README says, in either
 * order: with deliveries queued and retries waiting (delayed) in the layout of 4 shards, the worker
 * is stopped and started again on 8 while event-ingest still queues into the 4, then event-ingest
 * too; then from 8 to 2, event-ingest first (the worker on 8 serves the 2 it announces), then the
 * worker. Every accepted event reaches its receivers under one deliveryId (the stack's checks), the
 * extra copies are printed, and once no process uses the old layout any more and it holds no job,
 * the workers retire it: no key of it is left in Redis.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { createRedisConnection, layoutsKey, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { eventually } from "@vw/testing";
import type { Redis } from "ioredis";
import { FAULT_TEST_TIMEOUT_MS, report, startFaultStack, type FaultStack } from "./fault-stack.js";

const KEY_PREFIX = "faults";
let stack: FaultStack;
let redis: Redis;
let before: DeliveryQueues;
/**
 * The first endpoint answers 503 to the first attempt of every third delivery, which then waits
 * for its retry (delayed); the successes between keep the endpoint's consecutive failures low.
 */
const seen = new Set<string>();
const refused = new Set<string>();
beforeAll(async () => {
  stack = await startFaultStack({
    receivers: [
      (req, res) => {
        const deliveryId = String(req.headers["webhook-id"]);
        if (!seen.has(deliveryId)) {
          seen.add(deliveryId);
          if (seen.size % 3 === 0) refused.add(deliveryId);
        }
        const first = refused.delete(deliveryId);
        res.statusCode = first ? 503 : 200;
        res.end();
      },
      200,
    ],
    retryDelays: "3s",
    env: { QUEUE_SHARDS: "4", SCHEDULER_SWEEP_MS: "500" },
  });
  redis = createRedisConnection(stack.redis.url, "worker");
  before = openDeliveryQueues(redis, KEY_PREFIX, 4);
}, 120_000);
afterAll(async () => {
  await before?.close();
  redis?.disconnect();
  await stack?.close();
}, FAULT_TEST_TIMEOUT_MS);

/** Deliveries reach every receiver (10 more to each). */
async function flowing(): Promise<void> {
  const counts = stack.endpoints.map((e) => e.receiver.received.length);
  try {
    await eventually("deliveries flow (10 more to each receiver)", () => stack.endpoints.every((e, i) => e.receiver.received.length >= counts[i]! + 10), { timeoutMs: 20_000 });
  } catch (err) {
    const tail = (text: string) => text.split("\n").slice(-30).join("\n");
    throw new Error(`${(err as Error).message}\nworker log tail:\n${tail(stack.worker.stdout())}\ningest log tail:\n${tail(stack.ingest.stdout())}`);
  }
}

/** Every key of the layout of `shards` (its shards' tags are `dlv<shards>.<i>.<k>`). */
async function keysOfLayout(shards: number): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", `${KEY_PREFIX}:bull:{dlv${shards}.*`, "COUNT", 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== "0");
  return keys;
}

it("QUEUE_SHARDS 4 -> 8 with deliveries queued and retries delayed: every accepted event delivered, the old layout emptied", async () => {
  const producer = stack.produce();
  await flowing();
  await eventually("retries wait (delayed) in the layout of 4", async () => (await before.getJobCounts("delayed")).delayed! > 0);

  // The worker goes first; event-ingest keeps queueing into the 4 shards meanwhile.
  expect(await stack.worker.stop()).toBe(0);
  const pending = await eventually("deliveries wait in the layout of 4 with no worker", async () => {
    const counts = await before.getJobCounts("wait", "prioritized", "delayed");
    return counts.wait! + counts.prioritized! > 0 && counts.delayed! > 0 ? counts : null;
  });
  process.stdout.write(`[faults] QUEUE_SHARDS change: waiting in the layout of 4 when the worker restarted on 8: ${JSON.stringify(pending)}\n`);
  await stack.restart("worker", { QUEUE_SHARDS: "8" });
  await flowing();
  expect(stack.worker.stdout()).toContain('"queueShards":8');

  // Then event-ingest.
  expect(await stack.ingest.stop()).toBe(0);
  await stack.restart("ingest", { QUEUE_SHARDS: "8" });
  await flowing();
  const run = await producer.stop();
  const extra = await stack.verify(run);
  report("QUEUE_SHARDS 4 -> 8 (worker first, then event-ingest)", run, extra);

  // No process announces the 4 any more: once it holds no job, the worker retires it and deletes its keys.
  await layoutRetired(4);
  expect(await redis.smembers(layoutsKey(KEY_PREFIX))).toEqual(["8"]);
  expect(stack.worker.stdout()).toContain("an earlier delivery shard layout is drained");
  expect((await keysOfLayout(8)).length).toBeGreaterThan(0);
}, FAULT_TEST_TIMEOUT_MS * 2);

/** Waits until no process announces the layout of `count`, the worker retired it and none of its keys is left. */
async function layoutRetired(count: number): Promise<void> {
  await eventually(
    `the layout of ${count} is retired and none of its keys is left`,
    async () => (await keysOfLayout(count)).length === 0 && !(await redis.smembers(layoutsKey(KEY_PREFIX))).includes(String(count)),
    { timeoutMs: 60_000 },
  );
}

it("QUEUE_SHARDS 8 -> 2, event-ingest first: the worker still on 8 serves the 2 meanwhile; every accepted event delivered, the 8 emptied", async () => {
  const producer = stack.produce();
  await flowing();
  expect(await stack.ingest.stop()).toBe(0);
  await stack.restart("ingest", { QUEUE_SHARDS: "2" });
  // Only the worker on 8 runs: what reaches the receivers now was queued into the 2 it was told of.
  await flowing();
  expect(stack.worker.stdout()).toContain('"queueShards":2,"msg":"another delivery shard layout is in use');
  expect(await stack.worker.stop()).toBe(0);
  await stack.restart("worker", { QUEUE_SHARDS: "2" });
  await flowing();
  const run = await producer.stop();
  const extra = await stack.verify(run);
  report("QUEUE_SHARDS 8 -> 2 (event-ingest first, then the worker)", run, extra);

  await layoutRetired(8);
  expect(await redis.smembers(layoutsKey(KEY_PREFIX))).toEqual(["2"]);
}, FAULT_TEST_TIMEOUT_MS * 2);
