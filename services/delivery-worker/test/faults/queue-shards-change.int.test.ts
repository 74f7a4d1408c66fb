/**
 * Changes of QUEUE_SHARDS under load, in either order. A shard count is a key space of its own
 * (`dlv<n>.*`): a process on another count wakes endpoints where no worker of the new count looks,
 * and a worker of the new count finds none of the old one's drain jobs or retry timers. PostgreSQL
 * holds every delivery and when it is due, so nothing may be lost: the reconciler wakes, from
 * PostgreSQL, the endpoints of a layout whose index marker is missing and every endpoint with due
 * work each RECONCILE_INTERVAL_MS; and PostgreSQL's claims keep two drains of one endpoint (one per
 * layout, during a rolling update) from sending what the other holds.
 *
 * - 4 -> 8, the worker first (stopped, started again on 8) while event-ingest still wakes into the
 *   4, with deliveries waiting and retries (timer jobs) delayed in the 4; then event-ingest.
 * - 8 -> 2, event-ingest first (the worker on 8 still sends what it stores), then the worker as a
 *   rolling update: a replica on 2 starts while the one on 8 still runs, both send, then the old
 *   one stops.
 *
 * Each time, after the change: every accepted event reached its receivers under one deliveryId and
 * every stored delivery was delivered, and the extra copies are at most what the worker replicas
 * running at once can have in flight (DELIVERY_CONCURRENCY each): none is sent twice by two drains.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { createRedisConnection, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { eventually } from "@vw/testing";
import type { Redis } from "ioredis";
import { FAULT_TEST_TIMEOUT_MS, report, startFaultStack, type FaultStack } from "./fault-stack.js";

const KEY_PREFIX = "faults";
let stack: FaultStack;
let redis: Redis;
const layouts = new Map<number, DeliveryQueues>();
/**
 * The first endpoint answers 503 to the first attempt of every third delivery, which then waits
 * for its retry (a timer job, delayed); the successes between keep the endpoint's consecutive
 * failures low.
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
    env: { QUEUE_SHARDS: "4" },
  });
  redis = createRedisConnection(stack.redis.url, "worker");
}, 120_000);
afterAll(async () => {
  await Promise.all([...layouts.values()].map((q) => q.close()));
  redis?.disconnect();
  await stack?.close();
}, FAULT_TEST_TIMEOUT_MS);

/** The deliveries queue in the layout of `shards` (a handle of this test's own). */
function layout(shards: number): DeliveryQueues {
  let queues = layouts.get(shards);
  if (!queues) {
    queues = openDeliveryQueues(redis, KEY_PREFIX, shards);
    layouts.set(shards, queues);
  }
  return queues;
}

it("QUEUE_SHARDS 4 -> 8, the worker first, with deliveries waiting and retries delayed in the 4: every accepted event delivered", async () => {
  const producer = stack.produce();
  await stack.flowing(producer);
  await eventually("retries wait (timer jobs delayed) in the layout of 4", async () => (await layout(4).getJobCounts("delayed")).delayed! > 0);

  // The worker goes first; event-ingest keeps waking endpoints in the 4 shards meanwhile.
  expect(await stack.worker.stop()).toBe(0);
  const pending = await eventually("drains wait in the layout of 4 with no worker, and retries are delayed there", async () => {
    const counts = await layout(4).getJobCounts("wait", "delayed");
    return counts.wait! > 0 && counts.delayed! > 0 ? counts : null;
  });
  process.stdout.write(`[faults] QUEUE_SHARDS change: jobs in the layout of 4 when the worker restarted on 8: ${JSON.stringify(pending)}\n`);
  await stack.restart("worker", { QUEUE_SHARDS: "8" });
  await eventually("the worker runs on 8 shards", () => stack.worker.stdout().includes('"queueShards":8'));
  // No worker serves the 4 any more, yet what event-ingest stores still reaches the receivers.
  await stack.flowing(producer);

  // Then event-ingest.
  expect(await stack.ingest.stop()).toBe(0);
  await stack.restart("ingest", { QUEUE_SHARDS: "8" });
  await stack.flowing(producer);
  const run = await producer.stop();
  const extra = await stack.verify(run);
  // The retries whose timers were left in the 4 were sent too.
  await stack.allDelivered();
  report("QUEUE_SHARDS 4 -> 8 (worker first, then event-ingest)", run, extra);
}, FAULT_TEST_TIMEOUT_MS * 2);

/** Attempts each replica makes while both run (far more than the copies allowed). */
const OVERLAP_ATTEMPTS = 150;

it("QUEUE_SHARDS 8 -> 2, event-ingest first, then the worker rolled (both layouts' drains at once): every accepted event delivered, none sent twice", async () => {
  const producer = stack.produce();
  await stack.flowing(producer);
  expect(await stack.ingest.stop()).toBe(0);
  await stack.restart("ingest", { QUEUE_SHARDS: "2" });
  // Only the worker on 8 runs: event-ingest's drain jobs wait in the 2, unserved, and what it
  // stores reaches the receivers all the same.
  await eventually("drain jobs wait in the layout of 2, which no worker serves", async () => (await layout(2).getJobCounts("wait")).wait! > 0);
  await stack.flowing(producer);

  // The rolling update: a replica on 2 beside the one on 8. The new one drains the jobs in the 2;
  // the old one's drains go on too (they hear the same wakes): two drains per endpoint, one claim
  // per delivery.
  await stack.rollWorker({ QUEUE_SHARDS: "2" }, async (old, next) => {
    await eventually("the new replica runs on 2 shards", () => next.stdout().includes('"queueShards":2'));
    const before = await Promise.all([stack.attemptsOf(old), stack.attemptsOf(next)]);
    await eventually(
      // Enough that two drains sending the same deliveries would pass the bound of copies below.
      `both replicas send (${OVERLAP_ATTEMPTS} more attempts each)`,
      async () => {
        const now = await Promise.all([stack.attemptsOf(old), stack.attemptsOf(next)]);
        return now[0]! >= before[0]! + OVERLAP_ATTEMPTS && now[1]! >= before[1]! + OVERLAP_ATTEMPTS;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  });
  await stack.flowing(producer);
  const run = await producer.stop();
  // Two replicas were running: each can have had DELIVERY_CONCURRENCY attempts in flight when the
  // old one stopped; two drains sending the same deliveries would make far more copies.
  const extra = await stack.verify(run, { copiesAtMost: 2 * stack.deliveryConcurrency });
  await stack.allDelivered();
  report("QUEUE_SHARDS 8 -> 2 (event-ingest first, then the worker rolled)", run, extra);
}, FAULT_TEST_TIMEOUT_MS * 2);
