/**
 * Per-endpoint scheduling across worker replicas, with worker processes against one
 * Redis and one database:
 * - two workers together never have more attempts in flight for an endpoint than its window;
 * - the throttle (`rateLimitPerSecond`) spaces starts across both workers;
 * - a worker killed with a backlog parked loses nothing, and only attempts that were in flight at
 *   the kill can reach the receiver twice (at least once);
 * and, in-process, 429/503 halving the endpoint's window while the retry schedule is unchanged,
 * and parked jobs (the worker's and the producer's) running in the slots reserved for them.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { countingReceiver, startHarness, type Harness } from "./harness.js";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const processes: ServiceProcess[] = [];
const receivers: WebhookReceiver[] = [];

/** {@link countingReceiver}, closed after the tests. */
async function receiverCounting(delayMs: number): Promise<{ receiver: WebhookReceiver; maxInFlight: () => number }> {
  const { receiver, count } = await countingReceiver(delayMs);
  receivers.push(receiver);
  return { receiver, maxInFlight: () => count.most };
}

/** Waits until the receiver has seen every id. */
async function receivedAll(receiver: WebhookReceiver, ids: readonly string[]): Promise<void> {
  await eventually(
    `the receiver got each of the ${ids.length} deliveries`,
    () => {
      const seen = new Set(receiver.received.map((r) => String(r.headers["webhook-id"])));
      return ids.every((id) => seen.has(id));
    },
    { timeoutMs: 60_000 },
  );
}

/** Attempts this worker process made, read from its own `/metrics`. */
async function attemptsOf(worker: ServiceProcess): Promise<number> {
  const text = await (await fetch(`${worker.url}/metrics`)).text();
  const match = /^vw_delivery_attempts_total\{verdict="delivered"\} (\d+)$/m.exec(text);
  return Number(match?.[1] ?? 0);
}

afterAll(async () => {
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) await p.kill9();
  for (const r of receivers) await r.close();
});

describe("two worker processes", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ inProcessWorker: false });
  });
  afterAll(async () => {
    await h.close();
  });

  const spawnWorker = (extra: Record<string, string>): Promise<ServiceProcess> =>
    spawnService(serviceDir, h.processEnv({ DELIVERY_CONCURRENCY: "20", SCHEDULER_SWEEP_MS: "200", ...extra })).then((p) => {
      processes.push(p);
      return p;
    });

  it("never exceed an endpoint's window together", async () => {
    const { receiver, maxInFlight } = await receiverCounting(100);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
    receiver.setSecret(endpoint.secret);
    const env = { DELIVERY_ENDPOINT_CONCURRENCY: "3" };
    const workers = [await spawnWorker(env), await spawnWorker(env)];
    const ids: string[] = [];
    for (let i = 0; i < 60; i += 1) ids.push(await h.seedDelivery(endpoint, { enqueue: false }));
    await h.enqueue(ids.map((deliveryId) => ({ deliveryId, endpointId: endpoint.id, run: 0 })));

    await receivedAll(receiver, ids);
    // Each process alone would allow 3; together they still never held more than 3 at once.
    expect(maxInFlight()).toBeLessThanOrEqual(3);
    // The window did open to its limit (it starts at 2 and grows with each answer)...
    expect(maxInFlight()).toBe(3);
    // ...and both processes were sending, so the limit was shared, not per process.
    const perWorker = await Promise.all(workers.map(attemptsOf));
    expect(perWorker.every((n) => n > 0)).toBe(true);
    expect(receiver.received.every((r) => r.verifyError === null)).toBe(true);
    for (const w of workers) await w.stop();
  }, 90_000);

  it("space an endpoint's starts by its rateLimitPerSecond together", async () => {
    const RATE = 5;
    const { receiver } = await receiverCounting(0);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url, rateLimitPerSecond: RATE });
    receiver.setSecret(endpoint.secret);
    const workers = [await spawnWorker({}), await spawnWorker({})];
    const ids: string[] = [];
    for (let i = 0; i < 20; i += 1) ids.push(await h.seedDelivery(endpoint, { enqueue: false }));
    const enqueuedAt = Date.now();
    await h.enqueue(ids.map((deliveryId) => ({ deliveryId, endpointId: endpoint.id, run: 0 })));

    await receivedAll(receiver, ids);
    const at = receiver.received.map((r) => r.at).sort((a, b) => a - b);
    // Starts are reserved 1000/RATE ms apart from the first, which comes after the enqueue, and an
    // attempt can start late but never before its reserved time: the k-th arrival comes at least
    // (k - 1) slots after the enqueue (one slot of slack for the first reservation). Lateness only
    // delays arrivals, so a loaded machine cannot break this; a per-process throttle (two workers,
    // twice the rate) reaches the last arrivals in half that time. (Spans between arrivals are not
    // checked: one late arrival on a loaded machine narrows the span after it.)
    const early = at.map((t, k) => ({ k, afterEnqueueMs: t - enqueuedAt, scheduleMs: ((k - 1) * 1000) / RATE })).filter((a) => a.afterEnqueueMs < a.scheduleMs);
    expect(early).toEqual([]);
    const perWorker = await Promise.all(workers.map(attemptsOf));
    expect(perWorker.every((n) => n > 0)).toBe(true);
    for (const w of workers) await w.stop();
  }, 90_000);

  it("lose nothing when one is killed with a backlog parked; only what was in flight can arrive twice", async () => {
    const { receiver } = await receiverCounting(100);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
    receiver.setSecret(endpoint.secret);
    // A short timeout and lock, so the dead worker's leases and jobs come back quickly.
    const env = { DELIVERY_ENDPOINT_CONCURRENCY: "2", DELIVERY_TIMEOUT_MS: "2000", JOB_LOCK_MS: "1500" };
    const first = await spawnWorker(env);
    const ids: string[] = [];
    for (let i = 0; i < 40; i += 1) ids.push(await h.seedDelivery(endpoint, { enqueue: false }));
    await h.enqueue(ids.map((deliveryId) => ({ deliveryId, endpointId: endpoint.id, run: 0 })));

    await receiver.waitFor(6, 30_000);
    await first.kill9();
    const atKill = receiver.received.length;
    expect(atKill).toBeLessThan(ids.length);

    const second = await spawnWorker(env);
    await receivedAll(receiver, ids);
    const counts = new Map<string, number>();
    for (const r of receiver.received) counts.set(String(r.headers["webhook-id"]), (counts.get(String(r.headers["webhook-id"])) ?? 0) + 1);
    const twice = [...counts.values()].filter((n) => n > 1).length;
    // At most the dead worker's window (2) was in flight unanswered at the kill.
    expect(twice).toBeLessThanOrEqual(2);
    expect([...counts.values()].every((n) => n <= 2)).toBe(true);
    expect(receiver.received.every((r) => r.verifyError === null)).toBe(true);
    await eventually(
      "every delivery is delivered in the log",
      async () => (await h.prisma.webhookDelivery.count({ where: { id: { in: ids }, status: { not: "delivered" } } })) === 0,
    );
    expect((await second.stop()) ?? 0).toBe(0);
  }, 120_000);
});

describe("429 and 503", () => {
  let h: Harness;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    // One long retry delay: each delivery makes exactly one attempt during the test.
    h = await startHarness({ retryDelays: [60_000], endpointConcurrency: 10 });
    receiver = await startWebhookReceiver({ answer: 200 });
    receivers.push(receiver);
  });
  afterAll(async () => {
    await h.close();
  });

  /** Sends one delivery and waits until its attempt is logged and its slot released. */
  async function oneAttempt(endpoint: Awaited<ReturnType<Harness["createEndpoint"]>>): Promise<string> {
    const before = receiver.received.length;
    const id = await h.seedDelivery(endpoint);
    await receiver.waitFor(before + 1, 20_000);
    await eventually(
      `the attempt of ${id} is logged and its slot released`,
      async () => (await h.prisma.deliveryAttempt.count({ where: { deliveryId: id } })) === 1 && (await h.worker.schedulerFor(endpoint.id).inUse(endpoint.id)) === 0,
      { intervalMs: 20 },
    );
    return id;
  }

  it("halve the endpoint's window; other answers widen it; the failed delivery keeps its retry schedule", async () => {
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
    receiver.setSecret(endpoint.secret);
    // A new endpoint's window opens at the largest; answers keep it there.
    expect(await h.worker.schedulerFor(endpoint.id).windowOf(endpoint.id)).toBe(10);
    await oneAttempt(endpoint);
    expect(await h.worker.schedulerFor(endpoint.id).windowOf(endpoint.id)).toBe(10);

    receiver.answerWith(503);
    const throttled = await oneAttempt(endpoint);
    expect(await h.worker.schedulerFor(endpoint.id).windowOf(endpoint.id)).toBe(5);
    receiver.answerWith(429);
    await oneAttempt(endpoint);
    expect(await h.worker.schedulerFor(endpoint.id).windowOf(endpoint.id)).toBe(2);
    await oneAttempt(endpoint);
    expect(await h.worker.schedulerFor(endpoint.id).windowOf(endpoint.id)).toBe(1);
    await oneAttempt(endpoint);
    expect(await h.worker.schedulerFor(endpoint.id).windowOf(endpoint.id)).toBe(1);
    // A 500 is an answer like any other: the window grows again.
    receiver.answerWith(500);
    await oneAttempt(endpoint);
    expect(await h.worker.schedulerFor(endpoint.id).windowOf(endpoint.id)).toBe(2);

    // The 503'd delivery waits for its first retry exactly as the schedule says (60 s + up to 10%).
    const attempt = await h.prisma.deliveryAttempt.findFirstOrThrow({ where: { deliveryId: throttled } });
    const delivery = await h.prisma.webhookDelivery.findFirstOrThrow({ where: { id: throttled } });
    expect(delivery.status).toBe("pending");
    const delay = delivery.nextAttemptAt!.getTime() - attempt.startedAt.getTime();
    expect(delay).toBeGreaterThanOrEqual(60_000);
    expect(delay).toBeLessThanOrEqual(66_000 + attempt.durationMs + 1000);
  }, 60_000);
});

describe("parked jobs", () => {
  let h: Harness;
  beforeAll(async () => {
    // Leases of 35 s (the attempt timeout and its margin): a reservation left behind would hold
    // its slot far longer than this test waits.
    // No wait for a slot: a job finding the window full parks at once.
    h = await startHarness({ endpointConcurrency: 2, deliveryTimeoutMs: 30_000, slotWaitMs: 0 });
  });
  afterAll(async () => {
    await h.close();
  });

  it("run in the slots handed to them and leave no reservation behind, whoever parked them", async () => {
    const receiver = await startWebhookReceiver({ answer: 204 });
    receivers.push(receiver);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
    receiver.setSecret(endpoint.secret);
    const scheduler = h.worker.schedulerFor(endpoint.id);
    // Two holders fill the endpoint's window (2). A job queued meanwhile goes to the wait list (no
    // job is parked yet); the worker takes it, finds no slot and parks it: its next run is its second.
    await scheduler.acquire(endpoint.id, "holder-1", "t");
    await scheduler.acquire(endpoint.id, "holder-2", "t");
    const first = await h.seedDelivery(endpoint);
    const parkedSet = `${scheduler.base}ep:${endpoint.id}:parked`;
    await eventually("the worker parked the first job", async () => (await h.redis.zcard(parkedSet)) > 0, { intervalMs: 20 });
    expect(await h.deliveries.queueFor(endpoint.id).getJobState(first)).toBe("delayed");
    // The producer parks new jobs of the endpoint behind it: added delayed, and promoted later for
    // their first run.
    const later: string[] = [];
    for (let i = 0; i < 3; i += 1) later.push(await h.seedDelivery(endpoint, { enqueue: false }));
    await h.enqueue(later.map((deliveryId) => ({ deliveryId, endpointId: endpoint.id, run: 0 })));
    expect(await Promise.all(later.map((id) => h.deliveries.queueFor(endpoint.id).getJobState(id)))).toEqual(["delayed", "delayed", "delayed"]);

    // The holders finish: each freed slot is reserved for the oldest parked job and promoted.
    const all = [first, ...later];
    const completions = Promise.all(all.map((id) => h.completion(id, 10_000)));
    await scheduler.release(endpoint.id, "holder-1", "t", "none");
    await scheduler.release(endpoint.id, "holder-2", "t", "none");
    expect(await completions).toEqual(all.map(() => "delivered"));
    expect(receiver.received.map((r) => String(r.headers["webhook-id"])).sort()).toEqual([...all].sort());
    // Each job took its reservation as its slot and gave the slot back (the releases follow the
    // completions by a moment): nothing is left waiting for its lease to expire.
    await eventually("every slot of the endpoint is given back", async () => (await scheduler.inUse(endpoint.id)) === 0, { timeoutMs: 5000, intervalMs: 20 });
    expect(await h.redis.zcard(parkedSet)).toBe(0);
    // The worker's park recorded its intent first and dropped it with the park.
    expect(await h.redis.zcard(`${scheduler.base}parking`)).toBe(0);
  }, 30_000);
});
