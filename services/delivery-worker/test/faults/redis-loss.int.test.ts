/**
 * Redis goes away under load, three ways, one after the other on one stack: SIGKILLed and
 * restarted with its append-only file; SIGKILLed and restarted EMPTY while deliveries wait for
 * their retry (their timer jobs lost with it); its data flushed (FLUSHDB). PostgreSQL holds every
 * delivery and when it is due: each time Redis lost its data, the worker's reconciler finds its
 * shards' index markers gone and wakes every endpoint with pending deliveries from PostgreSQL, and
 * every accepted event reaches its receivers, with no more copies than the attempts in flight.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { Redis } from "ioredis";
import { eventually, type ReceivedDelivery } from "@vw/testing";
import type { ServerResponse } from "node:http";
import { FAULT_TEST_TIMEOUT_MS, report, startFaultStack, type FaultStack } from "./fault-stack.js";

/** Answers 503 to the first attempt of each delivery, 200 to the others: every delivery waits for a retry once. */
function failsFirstAttempt(seen: Set<string>) {
  return (req: ReceivedDelivery, res: ServerResponse) => {
    const id = String(req.headers["webhook-id"]);
    res.statusCode = seen.has(id) ? 200 : 503;
    seen.add(id);
    res.end();
  };
}

let stack: FaultStack;
const retried = new Set<string>();
beforeAll(async () => {
  // One receiver answers at once; the other makes every delivery wait 3 s in Redis for a retry.
  // Every first attempt failing would disable that endpoint after 50 in a row (as it should): not this test's subject.
  stack = await startFaultStack({ appendonly: true, receivers: [200, failsFirstAttempt(retried)], retryDelays: "3s", env: { DISABLE_AFTER_FAILURES: "1000000" }, httpServices: true });
}, 120_000);
afterAll(async () => {
  await stack?.close();
}, FAULT_TEST_TIMEOUT_MS);

const REBUILT = "dispatch index rebuilt from PostgreSQL";
/** Times the worker's reconciler logged that it woke the endpoints of lost shards from PostgreSQL. */
const rebuilds = (): number => stack.worker.stdout().split(REBUILT).length - 1;
/** Waits until the reconciler rebuilt again since it had `before` times. */
async function rebuiltFromPostgres(before: number): Promise<void> {
  await eventually(`the reconciler woke the endpoints from PostgreSQL ("${REBUILT}")`, () => rebuilds() > before, { timeoutMs: 60_000, intervalMs: 250 });
}

it("Redis SIGKILLed and restarted with its AOF under load: nothing lost", async () => {
  const producer = stack.produce();
  await stack.flowing(producer);
  await stack.redis.kill("SIGKILL");
  for (const service of stack.services()) {
    await eventually(`${service.url}/readyz answers 503 naming Redis`, async () => {
      const r = await stack.readiness(service);
      return r.status === 503 && r.failing.includes("redis");
    }, { timeoutMs: 30_000, intervalMs: 100 });
  }
  await stack.redis.restart();
  await stack.flowing(producer);
  const run = await producer.stop();
  report("Redis SIGKILL and restart with AOF", run, await stack.verify(run));
}, FAULT_TEST_TIMEOUT_MS);

it("Redis SIGKILLed and restarted EMPTY under load, with deliveries waiting for their retry: every one is sent", async () => {
  const producer = stack.produce();
  await stack.flowing(producer);
  // Deliveries waiting for their retry: PostgreSQL says when, a timer job in Redis wakes their endpoint.
  const waiting = await eventually("deliveries wait for a retry", async () => {
    const n = await stack.prisma.deliveryState.count({ where: { status: "pending", attemptCount: { gt: 0 } } });
    return n >= 10 ? n : 0;
  });
  const before = rebuilds();
  await stack.redis.kill("SIGKILL");
  await stack.redis.restart({ empty: true });
  const backAt = Date.now();
  await rebuiltFromPostgres(before);
  await stack.flowing(producer);
  process.stdout.write(`[faults] redis empty: ${waiting} deliveries were waiting for a retry; flowing again ${Date.now() - backAt} ms after the restart\n`);
  const run = await producer.stop();
  const extra = await stack.verify(run);
  await stack.allDelivered();
  report("Redis SIGKILL and restart empty, retries waiting", run, extra);
}, FAULT_TEST_TIMEOUT_MS);

it("the queue's keys flushed (FLUSHDB) under load: every delivery is sent", async () => {
  const producer = stack.produce();
  await stack.flowing(producer);
  const before = rebuilds();
  const admin = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
  try {
    expect(await admin.dbsize()).toBeGreaterThan(0);
    await admin.flushdb();
  } finally {
    admin.disconnect();
  }
  await rebuiltFromPostgres(before);
  await stack.flowing(producer);
  const run = await producer.stop();
  const extra = await stack.verify(run);
  await stack.allDelivered();
  report("FLUSHDB of the queue keys", run, extra);
}, FAULT_TEST_TIMEOUT_MS);
