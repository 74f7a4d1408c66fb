/**
 * When an endpoint's deliveries go out, under the endpoint drains (decision 0017):
 * - a retry is due at its schedule, and its timer job (`t-<endpoint>-<tick>`, DrainSignals.wakeAt)
 *   wakes the endpoint then; a delivery due later (a receiver's Retry-After) is not sent before its
 *   due time, however often its endpoint is woken meanwhile;
 * - a drain that lingers for more work goes on at the wake published for it, without a new job;
 * - `rateLimitPerSecond` spaces the endpoint's attempts (asserted on timestamps: the k-th request
 *   never arrives before k intervals after the wake);
 * - AIMD: a receiver that answers 429 above a few requests at once shrinks the endpoint's window,
 *   and still gets every delivery; another endpoint's window is untouched;
 * - a worker process killed mid-drain loses nothing, and only deliveries it sent without logging
 *   them can arrive twice.
 */
import type { ServerResponse } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { TIMER_TICK_MS, drainJobId, timerJobId } from "@vw/queues";
import { eventually, spawnService, startWebhookReceiver, type ReceivedDelivery, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { countingReceiver, startHarness, type Harness, type TestEndpoint } from "./harness.js";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const processes: ServiceProcess[] = [];
const receivers: WebhookReceiver[] = [];

afterAll(async () => {
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) await p.kill9();
  for (const r of receivers) await r.close();
});

async function receiver(answer: (req: ReceivedDelivery, res: ServerResponse) => void): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  return r;
}

/** Stores `n` deliveries of the endpoint in one statement, without waking it; returns their ids. */
async function store(h: Harness, endpoint: TestEndpoint, n: number): Promise<string[]> {
  return h.storeDeliveries(endpoint, n);
}

/** Waits until none of `ids` has a state left (each one delivered). */
async function allDelivered(h: Harness, ids: readonly string[], timeoutMs = 60_000): Promise<void> {
  await eventually(`all ${ids.length} deliveries delivered`, async () => (await h.prisma.deliveryState.count({ where: { deliveryId: { in: [...ids] } } })) === 0, {
    timeoutMs,
  });
}

/** How many times each delivery id reached `r`. */
function copies(r: WebhookReceiver): Map<string, number> {
  const counts = new Map<string, number>();
  for (const d of r.received) counts.set(String(d.headers["webhook-id"]), (counts.get(String(d.headers["webhook-id"])) ?? 0) + 1);
  return counts;
}

describe("retries and due times", () => {
  const RETRY_MS = 5000;
  let h: Harness;
  beforeAll(async () => {
    // No reconciler (it would wake the endpoint too) and a short linger: once its drain has ended,
    // only the retry's timer can wake the endpoint.
    h = await startHarness({ retryDelays: [RETRY_MS], drainLingerMs: 50, reconcile: null });
  });
  afterAll(async () => {
    await h.close();
  });

  it("a retry is due at its schedule and fires from its timer job, not before, however often its endpoint is woken meanwhile", async () => {
    const probe = await receiver((_req, res) => {
      res.statusCode = probe.received.length === 1 ? 503 : 200;
      res.end();
    });
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    const deliveryId = await h.seedDelivery(endpoint);
    const waiting = await eventually("the first attempt failed and the retry is scheduled", async () => {
      const row = await h.delivery(endpoint.id, deliveryId);
      return row?.status === "pending" && row.attemptCount === 1 ? row : null;
    });
    const dueAt = waiting.nextAttemptAt!;
    const [first] = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId } });
    expect(dueAt.getTime()).toBeGreaterThanOrEqual(first!.startedAt.getTime() + RETRY_MS);

    // The timer: one delayed drain.v1 job of the endpoint for the due time's tick, in its shard.
    const queue = h.deliveries.queueFor(endpoint.id);
    const timerId = timerJobId(endpoint.id, Math.ceil(dueAt.getTime() / TIMER_TICK_MS));
    const timer = await eventually("the retry's timer job is set", () => queue.getJob(timerId));
    expect(await timer.getState()).toBe("delayed");
    expect(timer.data).toEqual({ endpointId: endpoint.id });
    expect(timer.timestamp + timer.delay).toBeGreaterThanOrEqual(dueAt.getTime());
    // The first drain ended meanwhile: nothing else will wake the endpoint at the due time.
    await eventually("the first drain ended", async () => (await queue.getJob(drainJobId(endpoint.id))) === undefined);

    // Woken before its time (as a producer of another delivery, or the reconciler, would), the
    // endpoint's drain finds nothing due and sends nothing.
    for (let i = 0; i < 3; i += 1) {
      await h.wake([endpoint.id]);
      await eventually("the woken drain ended", async () => (await queue.getJob(drainJobId(endpoint.id))) === undefined);
    }
    expect(probe.received).toHaveLength(1);

    expect((await h.settled(endpoint.id, deliveryId, ["delivered"], 60_000)).status).toBe("delivered");
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
    expect(attempts.map((a) => [a.trigger, a.responseStatus])).toEqual([
      ["initial", 503],
      ["retry", 200],
    ]);
    expect(attempts[1]!.startedAt.getTime()).toBeGreaterThanOrEqual(dueAt.getTime());
    expect(probe.received).toHaveLength(2);
    // The timer fired (a fired job is removed).
    expect(await queue.getJob(timerId)).toBeUndefined();
  }, 90_000);

  it("a receiver's Retry-After longer than the schedule makes the delivery due later, and it is not sent before", async () => {
    const probe = await receiver((_req, res) => {
      if (probe.received.length === 1) {
        res.statusCode = 429;
        res.setHeader("retry-after", "8");
      } else res.statusCode = 200;
      res.end();
    });
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    const deliveryId = await h.seedDelivery(endpoint);
    const waiting = await eventually("the first attempt was throttled", async () => {
      const row = await h.delivery(endpoint.id, deliveryId);
      return row?.status === "pending" && row.attemptCount === 1 ? row : null;
    });
    expect(waiting.waitReason).not.toBeNull();
    const [first] = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId } });
    expect(waiting.nextAttemptAt!.getTime()).toBeGreaterThanOrEqual(first!.startedAt.getTime() + 8000);
    await h.wake([endpoint.id]);

    expect((await h.settled(endpoint.id, deliveryId, ["delivered"], 60_000)).status).toBe("delivered");
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
    expect(attempts.map((a) => a.responseStatus)).toEqual([429, 200]);
    expect(attempts[1]!.startedAt.getTime()).toBeGreaterThanOrEqual(waiting.nextAttemptAt!.getTime());
  }, 90_000);
});

describe("a lingering drain", () => {
  let h: Harness;
  beforeAll(async () => {
    // A linger longer than this test's whole run: a drain out of work never ends by itself here.
    h = await startHarness({ drainLingerMs: 600_000, reconcile: null });
  });
  afterAll(async () => {
    await h.close();
  });

  it("goes on at the wake published for its endpoint, with no new job", async () => {
    const probe = await receiver((_req, res) => {
      res.statusCode = 204;
      res.end();
    });
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    const first = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, first, ["delivered"])).status).toBe("delivered");
    const queue = h.deliveries.queueFor(endpoint.id);
    const drain = await queue.getJob(drainJobId(endpoint.id));
    expect(await drain!.getState()).toBe("active");

    // The next delivery's wake finds the drain job and only publishes: no job is added.
    const second = await h.seedDelivery(endpoint, { wake: false });
    expect(await h.signals.wake([endpoint.id])).toBe(0);
    // Only the published wake can make the lingering drain look again before its linger ends.
    expect((await h.settled(endpoint.id, second, ["delivered"], 60_000)).status).toBe("delivered");
    const still = await queue.getJob(drainJobId(endpoint.id));
    expect(await still!.getState()).toBe("active");
    expect(still!.processedOn).toBe(drain!.processedOn);
    expect(probe.received.map((r) => r.headers["webhook-id"])).toEqual([first, second]);
  }, 90_000);
});

describe("rateLimitPerSecond, AIMD", () => {
  const WINDOW = 10;
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ endpointConcurrency: WINDOW, retryDelays: [50, 100, 200, 400, 800, 1000, 1000, 1000, 1000], reconcile: null });
  });
  afterAll(async () => {
    await h.close();
  });

  it("spaces the endpoint's attempts by its rate: the k-th request never arrives before k intervals after the wake", async () => {
    const RATE = 5;
    const probe = await receiver((_req, res) => {
      res.statusCode = 200;
      res.end();
    });
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url, rateLimitPerSecond: RATE });
    probe.setSecret(endpoint.secret);
    const ids = await store(h, endpoint, 15);
    const wokenAt = Date.now();
    await h.wake([endpoint.id]);
    await allDelivered(h, ids);

    const at = probe.received.map((r) => r.at).sort((a, b) => a - b);
    expect(at).toHaveLength(ids.length);
    // A start can be late, never early: lateness only moves later starts later, so a loaded
    // machine cannot break this (1 ms of slack for timer rounding). Without the throttle, the
    // window would send ten at once.
    const early = at.map((t, k) => ({ k, afterWakeMs: t - wokenAt, notBeforeMs: (k * 1000) / RATE - 1 })).filter((a) => a.afterWakeMs < a.notBeforeMs);
    expect(early).toEqual([]);
    expect(probe.received.every((r) => r.verifyError === null)).toBe(true);
  }, 60_000);

  it("shrinks the window of an endpoint whose receiver answers 429 above 3 at once; it still gets every delivery, and another endpoint is untouched", async () => {
    const LIMIT = 3;
    let held = 0;
    const throttled = await receiver((_req, res) => {
      if (held >= LIMIT) {
        res.statusCode = 429;
        res.end();
        return;
      }
      held += 1;
      setTimeout(() => {
        held -= 1;
        res.statusCode = 200;
        res.end();
      }, 200);
    });
    const { receiver: other, count: otherCount } = await countingReceiver(200);
    receivers.push(other);
    const world = await h.createWorld();
    const throttledEndpoint = await h.createEndpoint(world.id, { url: throttled.url });
    const otherEndpoint = await h.createEndpoint(world.id, { url: other.url });
    throttled.setSecret(throttledEndpoint.secret);
    other.setSecret(otherEndpoint.secret);
    const throttledIds = await store(h, throttledEndpoint, 60);
    const otherIds = await store(h, otherEndpoint, 30);
    await h.wake([throttledEndpoint.id, otherEndpoint.id]);
    await allDelivered(h, [...throttledIds, ...otherIds], 120_000);

    // Every delivery was answered 200 exactly once.
    const statuses = await h.prisma.deliveryAttempt.findMany({ where: { endpointId: throttledEndpoint.id }, select: { deliveryId: true, responseStatus: true } });
    const ok = statuses.filter((s) => s.responseStatus === 200).map((s) => s.deliveryId);
    expect([...ok].sort()).toEqual([...throttledIds].sort());
    const refused = statuses.filter((s) => s.responseStatus === 429).length;
    // It was throttled, and the window took the hint: a window kept at 10 would have most of each
    // round refused (7 of 10), far more 429s than deliveries.
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBeLessThan(throttledIds.length);
    const stored = await h.signals.loadWindow(throttledEndpoint.id);
    expect(stored).not.toBeNull();
    expect(stored!.max).toBe(WINDOW);
    // The size that last proved too large is remembered: below the largest window (it shrank more
    // than once), and the window is not above it.
    expect(stored!.ceiling).not.toBeNull();
    expect(stored!.ceiling!).toBeLessThan(WINDOW);
    expect(stored!.size).toBeLessThanOrEqual(stored!.ceiling!);

    // The other endpoint: one attempt each, more at once than the throttled one's limit, and a
    // window never changed (so never stored).
    expect(await h.prisma.deliveryAttempt.count({ where: { endpointId: otherEndpoint.id } })).toBe(otherIds.length);
    expect(otherCount.most).toBeGreaterThan(LIMIT);
    expect(await h.signals.loadWindow(otherEndpoint.id)).toBeNull();
  }, 150_000);
});

describe("a worker process killed mid-drain", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ inProcessWorker: false });
  });
  afterAll(async () => {
    await h.close();
  });

  it("loses nothing; only deliveries it sent without logging them arrive twice", async () => {
    const WINDOW = 2;
    const { receiver: probe, count } = await countingReceiver(100);
    receivers.push(probe);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    // A short timeout and lock: the dead worker's job comes back within the lock, its claims
    // after their lease (four timeouts and 10 s), woken by the next reconciler sweep.
    const env = h.processEnv({
      DELIVERY_ENDPOINT_CONCURRENCY: String(WINDOW),
      DELIVERY_TIMEOUT_MS: "2000",
      JOB_LOCK_MS: "1500",
      RETRY_DELAYS: "60s",
      RECONCILE_INTERVAL_MS: "1000",
    });
    const spawn = async (): Promise<ServiceProcess> => {
      const p = await spawnService(serviceDir, env, { readyTimeoutMs: 60_000 });
      processes.push(p);
      return p;
    };
    const first = await spawn();
    const ids = await store(h, endpoint, 40);
    await h.wake([endpoint.id]);
    await probe.waitFor(6, 30_000);
    await first.kill9();
    // What the dead worker sent has all arrived once the receiver holds nothing more.
    await eventually("the receiver answered everything the dead worker sent", () => count.now === 0);
    const beforeKill = new Set(probe.received.map((r) => String(r.headers["webhook-id"])));
    expect(beforeKill.size).toBeLessThan(ids.length);

    const second = await spawn();
    await allDelivered(h, ids, 90_000);
    const counts = copies(probe);
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    const twice = [...counts.entries()].filter(([, n]) => n > 1).map(([id]) => id);
    // A copy only of what the dead worker had sent, never a third.
    expect([...counts.values()].filter((n) => n > 2)).toEqual([]);
    expect(twice.filter((id) => !beforeKill.has(id))).toEqual([]);
    // Each delivery has exactly one attempt logged: a delivery whose attempt was logged is never sent again.
    const logged = await h.prisma.deliveryAttempt.groupBy({ by: ["deliveryId"], where: { endpointId: endpoint.id }, _count: { _all: true } });
    expect(logged.filter((g) => g._count._all !== 1)).toEqual([]);
    expect(logged).toHaveLength(ids.length);
    expect(probe.received.every((r) => r.verifyError === null)).toBe(true);
    expect((await second.stop()) ?? 0).toBe(0);
  }, 180_000);
});
