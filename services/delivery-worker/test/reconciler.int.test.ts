/**
 * PostgreSQL is the schedule of record; Redis only says which endpoints have work (drain jobs,
 * retry timers). The reconciler puts that back:
 * - when Redis lost its data (every key of the deployment's prefix gone, as after a restart
 *   without its data, a FLUSHALL or a failover to a replica that never had it: the shards' index
 *   markers are gone), it wakes from PostgreSQL every endpoint with pending deliveries: due ones
 *   at once, retries at their time. These tests run with a sweep interval longer than they take,
 *   so what is sent after the loss was woken by that rebuild alone;
 * - every RECONCILE_INTERVAL_MS its sweep wakes every endpoint with due deliveries that nobody
 *   woke (a producer killed between its commit and its wake: intake, Replay);
 * - one replica's reconciler at a time is active, through its lease in Redis.
 * And wakes never make a delivery go twice or early: PostgreSQL's claims and due times decide.
 */
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DeliveryLog, prismaRunner } from "@vw/db";
import { drainJobId, indexMarkerKey } from "@vw/queues";
import { deleteKeysUnder, eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { Reconciler } from "../src/reconciler.js";
import { silentLogger, startHarness, type Harness } from "./harness.js";

/** The retry delay: far longer than storing a few deliveries and deleting the Redis keys takes. */
const RETRY_MS = 5000;
const receivers: WebhookReceiver[] = [];
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(answer: Parameters<typeof startWebhookReceiver>[0] extends infer O ? (O extends { answer?: infer A } ? A : never) : never = 200) {
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  return r;
}

/** Whether every delivery shard of the harness is marked indexed. */
async function allIndexed(h: Harness): Promise<boolean> {
  const markers = await Promise.all(h.deliveries.shards.map((q) => h.redis.get(indexMarkerKey(q))));
  return markers.every((m) => m !== null && m.startsWith("indexed:"));
}

const idsReceived = (r: WebhookReceiver) => r.received.map((x) => x.headers["webhook-id"]);

describe("when Redis loses its data", () => {
  let h: Harness;
  beforeAll(async () => {
    // No sweep within the test: only the rebuild can wake anything after the loss.
    h = await startHarness({ retryDelays: [RETRY_MS], reconcile: { sweepIntervalMs: 3_600_000, checkIntervalMs: 200 } });
    await eventually("the reconciler indexed the empty schedule", () => allIndexed(h));
  });
  afterAll(async () => {
    await h.close();
  });

  it("wakes every endpoint with pending deliveries from PostgreSQL: due ones at once, retries at their time", async () => {
    const world = await h.createWorld();
    // The first attempt of each delivery fails: each then waits for its retry, whose timer is in Redis only.
    const flaky = await receiver((req, res) => {
      res.statusCode = flaky.received.filter((r) => r.headers["webhook-id"] === req.headers["webhook-id"]).length === 1 ? 503 : 200;
      res.end();
    });
    const steady = await receiver(200);
    const retrying = await h.createEndpoint(world.id, { url: flaky.url });
    const unsent = await h.createEndpoint(world.id, { url: steady.url });
    const waitingForRetry = await Promise.all([0, 1, 2].map(() => h.seedDelivery(retrying)));
    await eventually("each of the three got its first (failed) attempt", async () => {
      const states = await h.prisma.deliveryState.findMany({ where: { deliveryId: { in: waitingForRetry } } });
      return states.length === 3 && states.every((s) => s.status === "pending" && s.attemptCount === 1);
    });
    // Stored, never woken: a producer killed between its commit and its wake.
    const neverWoken = await Promise.all([0, 1].map(() => h.seedDelivery(unsent, { wake: false })));

    // Every key of the deployment goes: drain jobs, retry timers, flags, markers, the lease.
    expect(await deleteKeysUnder(h.redis, `${h.keyPrefix}:`)).toBeGreaterThan(0);

    await eventually("both never-woken deliveries arrived", () => neverWoken.every((id) => idsReceived(steady).includes(id)), { timeoutMs: 60_000 });
    await eventually(
      "the three retries were sent and delivered",
      async () => (await Promise.all(waitingForRetry.map((id) => h.delivery(retrying.id, id)))).every((d) => d?.status === "delivered"),
      { timeoutMs: 60_000 },
    );
    for (const id of neverWoken) expect((await h.settled(unsent.id, id)).status).toBe("delivered");
    expect(idsReceived(steady).sort()).toEqual([...neverWoken].sort());
    for (const id of waitingForRetry) {
      // Two attempts each: the rebuild brought the retry back, it did not add one.
      expect({ id, received: idsReceived(flaky).filter((x) => x === id).length }).toEqual({ id, received: 2 });
      const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId: id }, orderBy: { attemptNumber: "asc" } });
      expect(attempts.map((a) => [a.trigger, a.responseStatus])).toEqual([
        ["initial", 503],
        ["retry", 200],
      ]);
      // Not before its due time: the retry came at least RETRY_MS after the first attempt.
      expect(attempts[1]!.startedAt.getTime() - attempts[0]!.startedAt.getTime()).toBeGreaterThanOrEqual(RETRY_MS);
    }
    expect(await allIndexed(h)).toBe(true);
    // The endpoint with due deliveries got its drain job from the rebuild.
    const rebuilt = (await h.worker.metrics.reconciled.get()).values.find((v) => v.labels.reason === "rebuild");
    expect(rebuilt?.value).toBeGreaterThanOrEqual(1);
  }, 120_000);
});

describe("the sweep, and wakes", () => {
  let h: Harness;
  const log = () => new DeliveryLog(prismaRunner(h.prisma));
  beforeAll(async () => {
    h = await startHarness({ retryDelays: [RETRY_MS], reconcile: { sweepIntervalMs: 1000, checkIntervalMs: 200 } });
    await eventually("the reconciler indexed the empty schedule", () => allIndexed(h));
  });
  afterAll(async () => {
    await h.close();
  });

  it("wakes an endpoint whose delivery was stored but never woken, and it is sent once", async () => {
    const world = await h.createWorld();
    const probe = await receiver(200);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint, { wake: false });
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    expect(idsReceived(probe)).toEqual([deliveryId]);
    expect(await h.prisma.deliveryAttempt.count({ where: { deliveryId } })).toBe(1);
  });

  it("sends a Replay whose process died before waking its endpoint, under its new run, once", async () => {
    const world = await h.createWorld();
    const probe = await receiver(200);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    // Replay's first half (back to pending in a new run), and no wake: the process died there.
    expect(await log().requeue(endpoint.id, [deliveryId])).toEqual([deliveryId]);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    await probe.waitFor(2);
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
    expect(attempts.map((a) => a.trigger)).toEqual(["initial", "replay"]);
    expect(idsReceived(probe)).toEqual([deliveryId, deliveryId]);
    expect(probe.received[1]!.body.equals(probe.received[0]!.body)).toBe(true);
  });

  it("a delivery in flight through sweeps and wakes is sent once", async () => {
    const held: ServerResponse[] = [];
    const probe = await receiver((_req, res) => void held.push(res));
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    await eventually("the attempt is at the receiver", () => held.length === 1);
    // Due for longer than the sweep's grace, and claimed: every sweep and wake finds it pending.
    const { dueAt } = await h.prisma.deliveryState.findUniqueOrThrow({ where: { deliveryId } });
    await eventually("the delivery is past the sweep's grace", () => Date.now() > dueAt!.getTime() + 1500);
    for (let i = 0; i < 3; i += 1) {
      await h.worker.reconciler!.sweep();
      await h.wake([endpoint.id]);
    }
    // One drain job for the endpoint, running.
    expect(await h.deliveries.queueFor(endpoint.id).getJobState(drainJobId(endpoint.id))).toBe("active");
    held[0]!.statusCode = 200;
    held[0]!.end();
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    expect(held).toHaveLength(1);
    expect(idsReceived(probe)).toEqual([deliveryId]);
    expect(await h.prisma.deliveryAttempt.count({ where: { deliveryId } })).toBe(1);
  });

  it("a wake before a retry's due time sends nothing early", async () => {
    const world = await h.createWorld();
    const probe = await receiver(503);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    await eventually("the first attempt failed", async () => (await h.prisma.deliveryState.findUnique({ where: { deliveryId } }))?.attemptCount === 1);
    probe.answerWith(200);
    const { dueAt } = await h.prisma.deliveryState.findUniqueOrThrow({ where: { deliveryId } });
    // Woken, and swept, while the retry waits: the drain finds nothing due.
    await h.wake([endpoint.id]);
    await h.worker.reconciler!.sweep();
    await h.wake([endpoint.id]);
    expect((await h.settled(endpoint.id, deliveryId, ["delivered"], 60_000)).status).toBe("delivered");
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
    expect(attempts.map((a) => [a.trigger, a.responseStatus])).toEqual([
      ["initial", 503],
      ["retry", 200],
    ]);
    expect(attempts[1]!.startedAt.getTime()).toBeGreaterThanOrEqual(dueAt!.getTime());
    expect(probe.received).toHaveLength(2);
  });

  it("is active in one replica at a time: its lease passes on when the holder stops", async () => {
    const worker = h.worker;
    const mine = worker.reconciler!;
    // A second replica's reconciler, on the same deployment (lease key, queues, database).
    const other = new Reconciler({
      log: worker.db.log,
      queues: worker.deliveries.queues,
      signals: worker.deliveries.signals,
      timers: worker.deliveries.timers,
      redis: h.redis,
      leaseKey: `${h.keyPrefix.replace(/:+$/, "")}:reconciler:lease`,
      sweepIntervalMs: 1000,
      checkIntervalMs: 200,
      logger: silentLogger,
    });
    try {
      await mine.tick();
      await other.tick();
      expect([mine.isActive, other.isActive]).toEqual([true, false]);
      // The holder stops (its process closing): the lease is given up, the other takes it and sweeps.
      await mine.stop();
      other.start();
      await eventually("the other replica's reconciler took the lease", () => other.isActive);
      const world = await h.createWorld();
      const probe = await receiver(200);
      const endpoint = await h.createEndpoint(world.id, { url: probe.url });
      const deliveryId = await h.seedDelivery(endpoint, { wake: false });
      expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
      expect(idsReceived(probe)).toEqual([deliveryId]);
      // The first one back: it stays inactive while the other holds the lease.
      mine.start();
      await mine.tick();
      expect([mine.isActive, other.isActive]).toEqual([false, true]);
    } finally {
      await other.stop();
    }
    await eventually("the worker's reconciler holds the lease again", () => mine.isActive);
  });
});
