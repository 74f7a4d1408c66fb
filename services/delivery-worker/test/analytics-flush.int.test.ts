/**
 * The analytics flush against the real Redis, PostgreSQL and deliveries queue: a burst far larger
 * than the buffer stays bounded (what is trimmed is counted), every batch holds at most 100
 * events, an endpoint gets at most one POST per flush, and each batch is a valid, signed
 * `analytics.batch` delivery. At least once: a flush whose database write fails loses nothing, and
 * the next flush sends that same batch, once; a batch stored whose wake failed is PostgreSQL's,
 * and the reconciler's sweep gets it sent, once.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { validateDelivered } from "@vw/contracts";
import { analyticsKeys, drainJobId, pushAnalyticsEvents } from "@vw/queues";
import { deleteKeysUnder, eventually, metricValue, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { flushAnalytics, type AnalyticsFlushDeps } from "../src/analytics-flush.js";
import { ANALYTICS_DROP_REASONS, type AnalyticsDropReason } from "../src/metrics.js";
import { silentLogger, startHarness, type Harness } from "./harness.js";

const BUFFER_MAX = 1000;
const BATCH_MAX = 100;
const BURST = 10_000;
let h: Harness;
const receivers: WebhookReceiver[] = [];
let deps: AnalyticsFlushDeps;

beforeAll(async () => {
  h = await startHarness();
  deps = {
    redis: h.redis,
    sql: h.worker.db.sql,
    log: h.worker.db.log,
    signals: h.signals,
    keyPrefix: h.keyPrefix,
    playUrl: "https://play.example.test",
    batchMax: BATCH_MAX,
    logger: silentLogger,
    metrics: h.worker.metrics,
  };
});
afterAll(async () => {
  await deleteKeysUnder(h.redis, `${h.keyPrefix}:analytics:`);
  await Promise.all(receivers.map((r) => r.close()));
  await h.close();
});

/**
 * `target` whose `method` (or one of `alike`) rejects on its first call (the way a dropped
 * connection or a failed statement does) and behaves normally afterwards: the fault injected into
 * one flush.
 */
function failingOnce<T extends object>(target: T, method: string, ...alike: string[]): T {
  let failed = false;
  return new Proxy(target, {
    get(obj, prop) {
      const value: unknown = Reflect.get(obj, prop, obj);
      if ((prop === method || alike.includes(prop as string)) && !failed) {
        return () => {
          failed = true;
          return Promise.reject(new Error(`injected ${method} failure`));
        };
      }
      return typeof value === "function" ? value.bind(obj) : value;
    },
  });
}

/** `vw_analytics_events_dropped_total{reason}` of the worker under test. */
function dropped(reason: AnalyticsDropReason): Promise<number> {
  return metricValue(h.worker.metrics.analyticsDropped, { reason });
}

async function droppedTotals(): Promise<Record<AnalyticsDropReason, number>> {
  const entries = await Promise.all(ANALYTICS_DROP_REASONS.map(async (r) => [r, await dropped(r)] as const));
  return Object.fromEntries(entries) as Record<AnalyticsDropReason, number>;
}

/** Sent inner events, by their `durationSeconds` marker, across every request of a receiver. */
function sentMarkers(receiver: WebhookReceiver): number[] {
  return receiver.received.flatMap((request) =>
    JSON.parse(request.body.toString("utf8")).data.events.map((e: { data: { properties: { durationSeconds: number } } }) => e.data.properties.durationSeconds),
  );
}

/** A valid inner event; `n` is recorded so tests can tell which events survived. */
function innerEvent(n: number): string {
  const at = new Date(Date.UTC(2026, 10, 12, 15, 0, 0) + n).toISOString();
  return JSON.stringify({
    id: randomUUID(),
    type: "area.dwell",
    timestamp: at,
    data: {
      eventName: "area.dwell",
      source: "pusher",
      eventTime: at,
      user: { uuid: randomUUID() },
      room: { url: "https://play.example.test/@/acme/lobby/office.wam" },
      properties: { durationSeconds: n, areaName: "Kitchen" },
    },
  });
}

async function analyticsEndpoint(subscriptions = ["analytics"]) {
  const receiver = await startWebhookReceiver({ answer: 204 });
  receivers.push(receiver);
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url, subscriptions });
  receiver.setSecret(endpoint.secret);
  return { receiver, endpoint, world };
}

describe("a burst of 10,000 inner events for one endpoint", () => {
  it("stays bounded, counts what is trimmed, and goes out one batch of ≤ 100 per flush, signed and valid", async () => {
    const { receiver, endpoint, world } = await analyticsEndpoint();
    const keys = analyticsKeys(h.keyPrefix, endpoint.worldId);
    const events = Array.from({ length: BURST }, (_, n) => innerEvent(n));

    let trimmed = 0;
    for (let i = 0; i < BURST; i += 500) {
      trimmed += await pushAnalyticsEvents(h.redis, h.keyPrefix, endpoint.worldId, endpoint.id, events.slice(i, i + 500), BUFFER_MAX);
      expect(await h.redis.llen(keys.buffer(endpoint.id))).toBeLessThanOrEqual(BUFFER_MAX);
    }
    expect(trimmed).toBe(BURST - BUFFER_MAX);
    expect(await h.redis.get(keys.dropped(endpoint.id))).toBe(String(BURST - BUFFER_MAX));
    expect(await h.redis.sismember(keys.pending, endpoint.id)).toBe(1);

    const droppedBefore = (await dropped("buffer-full"));
    const flushes = BUFFER_MAX / BATCH_MAX + 1;
    const deliveryIds: string[] = [];
    for (let run = 0; run < flushes; run += 1) {
      const result = await flushAnalytics(deps);
      expect(result.deliveryIds.length).toBeLessThanOrEqual(1);
      deliveryIds.push(...result.deliveryIds);
      for (const id of result.deliveryIds) expect((await h.settled(endpoint.id, id)).status).toBe("delivered");
      // The dropped counter is collected by the first flush, for the metrics.
      if (run === 0) {
        expect((await dropped("buffer-full")) - droppedBefore).toBe(BURST - BUFFER_MAX);
        expect(await h.redis.exists(keys.dropped(endpoint.id))).toBe(0);
      }
    }

    // At most one POST per flush; the last flush found the buffer empty.
    expect(deliveryIds).toHaveLength(BUFFER_MAX / BATCH_MAX);
    expect(receiver.received.length).toBeLessThanOrEqual(flushes);
    expect(receiver.received).toHaveLength(BUFFER_MAX / BATCH_MAX);
    const sent: number[] = [];
    for (const request of receiver.received) {
      expect(request.verifyError).toBeNull();
      const body = JSON.parse(request.body.toString("utf8"));
      const valid = validateDelivered("analytics.batch", body);
      expect(valid.ok ? [] : valid.errors).toEqual([]);
      expect(body.type).toBe("analytics.batch");
      expect(body.world).toEqual({ slug: world.slug, url: `https://play.example.test/@/${world.organizationSlug}/${world.slug}` });
      expect(body.data.events.length).toBeLessThanOrEqual(BATCH_MAX);
      sent.push(...body.data.events.map((e: { data: { properties: { durationSeconds: number } } }) => e.data.properties.durationSeconds));
    }
    // The newest events were kept, each sent once, in order.
    expect(sent).toEqual(Array.from({ length: BUFFER_MAX }, (_, i) => BURST - BUFFER_MAX + i));
    expect(await h.redis.exists(keys.buffer(endpoint.id))).toBe(0);
    expect(await h.redis.sismember(keys.pending, endpoint.id)).toBe(0);

    const rows = await h.prisma.webhookDelivery.findMany({ where: { endpointId: endpoint.id } });
    expect(rows.map((r) => r.type)).toEqual(Array(BUFFER_MAX / BATCH_MAX).fill("analytics.batch"));
    // Delivered: none of them has a state left.
    expect(await h.prisma.deliveryState.count({ where: { endpointId: endpoint.id } })).toBe(0);
  });
});

describe("an endpoint that can no longer receive analytics", () => {
  it("gets nothing: its buffer is discarded and counted when it was disabled or unsubscribed", async () => {
    const disabled = await analyticsEndpoint();
    const unsubscribed = await analyticsEndpoint();
    const keys = (endpoint: { worldId: string }) => analyticsKeys(h.keyPrefix, endpoint.worldId);
    for (const { endpoint } of [disabled, unsubscribed]) {
      await pushAnalyticsEvents(h.redis, h.keyPrefix, endpoint.worldId, endpoint.id, [innerEvent(1), innerEvent(2)], BUFFER_MAX);
    }
    await h.prisma.webhookEndpoint.update({ where: { id: disabled.endpoint.id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    await h.prisma.webhookEndpoint.update({ where: { id: unsubscribed.endpoint.id }, data: { subscriptions: ["visitor"] } });
    const before = (await dropped("endpoint-unavailable"));

    const result = await flushAnalytics(deps);
    expect(result.deliveryIds).toEqual([]);
    expect(result.dropped).toBe(4);
    expect((await dropped("endpoint-unavailable")) - before).toBe(4);
    for (const { endpoint, receiver } of [disabled, unsubscribed]) {
      expect(await h.redis.exists(keys(endpoint).buffer(endpoint.id))).toBe(0);
      expect(await h.redis.sismember(keys(endpoint).pending, endpoint.id)).toBe(0);
      expect(await h.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(0);
      expect(receiver.received).toHaveLength(0);
    }
  });

  it("exposes the dropped totals on /metrics", async () => {
    const text = await h.worker.serviceMetrics.registry.metrics();
    expect(text).toMatch(/vw_analytics_events_dropped_total\{reason="buffer-full"\} \d+/);
    expect(text).toMatch(/vw_analytics_batches_total \d+/);
  });
});

describe("at least once", () => {
  it("a database write that fails loses nothing: the next flush sends the same batch, under the same deliveryId, once", async () => {
    const { receiver, endpoint } = await analyticsEndpoint();
    const keys = analyticsKeys(h.keyPrefix, endpoint.worldId);
    await pushAnalyticsEvents(h.redis, h.keyPrefix, endpoint.worldId, endpoint.id, Array.from({ length: 150 }, (_, n) => innerEvent(n)), BUFFER_MAX);
    const droppedBefore = await droppedTotals();

    await expect(flushAnalytics({ ...deps, log: failingOnce(deps.log, "create") })).rejects.toThrow("injected create failure");
    // Nothing stored, nothing dropped: the batch waits in flight, the rest in the buffer.
    expect(await h.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(0);
    expect(await droppedTotals()).toEqual(droppedBefore);
    const held = await h.redis.hgetall(keys.inflight(endpoint.id));
    expect(Number(held.n)).toBe(BATCH_MAX);
    expect(await h.redis.llen(keys.buffer(endpoint.id))).toBe(50);
    expect(await h.redis.sismember(keys.pending, endpoint.id)).toBe(1);

    // Events arriving meanwhile queue up behind the held batch.
    await pushAnalyticsEvents(h.redis, h.keyPrefix, endpoint.worldId, endpoint.id, Array.from({ length: 10 }, (_, n) => innerEvent(150 + n)), BUFFER_MAX);
    const retry = await flushAnalytics(deps);
    expect(retry.deliveryIds).toEqual([held.id]);
    expect(retry.events).toBe(BATCH_MAX);
    expect((await h.settled(endpoint.id, held.id!)).status).toBe("delivered");
    const rest = await flushAnalytics(deps);
    expect(rest.events).toBe(60);
    expect((await h.settled(endpoint.id, rest.deliveryIds[0]!)).status).toBe("delivered");
    expect((await flushAnalytics(deps)).deliveryIds).toEqual([]);

    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[0]!.headers["webhook-id"]).toBe(held.id);
    for (const request of receiver.received) expect(request.verifyError).toBeNull();
    expect(sentMarkers(receiver)).toEqual(Array.from({ length: 160 }, (_, n) => n));
    expect(await h.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(2);
    expect(await h.redis.exists(keys.inflight(endpoint.id), keys.buffer(endpoint.id))).toBe(0);
    expect(await h.redis.sismember(keys.pending, endpoint.id)).toBe(0);
    expect(await droppedTotals()).toEqual(droppedBefore);
  });

  it("a batch stored whose wake failed is PostgreSQL's: released from Redis, and sent once after the reconciler's sweep wakes its endpoint", async () => {
    const { receiver, endpoint } = await analyticsEndpoint();
    const keys = analyticsKeys(h.keyPrefix, endpoint.worldId);
    await pushAnalyticsEvents(h.redis, h.keyPrefix, endpoint.worldId, endpoint.id, Array.from({ length: 5 }, (_, n) => innerEvent(n)), BUFFER_MAX);
    const batchesBefore = await metricValue(h.worker.metrics.analyticsBatches);

    // Redis refuses the wake after the batch's row committed: the flush goes on (the row is the record).
    const result = await flushAnalytics({ ...deps, signals: failingOnce(h.signals, "wake") });
    expect(result.deliveryIds).toHaveLength(1);
    const [id] = result.deliveryIds;
    const [row, ...others] = await h.prisma.webhookDelivery.findMany({ where: { endpointId: endpoint.id } });
    expect(others).toEqual([]);
    expect(row).toMatchObject({ id, type: "analytics.batch" });
    expect((await h.delivery(endpoint.id, id!))?.status).toBe("pending");
    expect(await h.deliveries.queueFor(endpoint.id).getJob(drainJobId(endpoint.id))).toBeUndefined();
    // Released: the next flush has nothing to send again.
    expect(await h.redis.exists(keys.inflight(endpoint.id), keys.buffer(endpoint.id))).toBe(0);
    expect((await flushAnalytics(deps)).deliveryIds).toEqual([]);

    // The sweep (RECONCILE_INTERVAL_MS) wakes every endpoint with due deliveries, once they are
    // past its grace for a writer's own wake (the worker's own sweep may come first).
    await eventually("a sweep woke the endpoint", async () => receiver.received.length > 0 || (await h.worker.reconciler!.sweep()).woken > 0, { timeoutMs: 20_000, intervalMs: 250 });
    expect((await h.settled(endpoint.id, id!)).status).toBe("delivered");
    expect(await h.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(1);
    expect((await metricValue(h.worker.metrics.analyticsBatches)) - batchesBefore).toBe(1);
    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0]!.headers["webhook-id"]).toBe(id);
    // Byte for byte the row the flush wrote.
    expect(receiver.received[0]!.body.equals(Buffer.from(row!.body))).toBe(true);
    expect(sentMarkers(receiver)).toEqual([0, 1, 2, 3, 4]);
  });

  it("a held batch of an endpoint disabled meanwhile is discarded and counted, not kept", async () => {
    const { receiver, endpoint } = await analyticsEndpoint();
    const keys = analyticsKeys(h.keyPrefix, endpoint.worldId);
    await pushAnalyticsEvents(h.redis, h.keyPrefix, endpoint.worldId, endpoint.id, [innerEvent(1), innerEvent(2), innerEvent(3)], BUFFER_MAX);
    await expect(flushAnalytics({ ...deps, log: failingOnce(deps.log, "create") })).rejects.toThrow();
    await pushAnalyticsEvents(h.redis, h.keyPrefix, endpoint.worldId, endpoint.id, [innerEvent(4)], BUFFER_MAX);
    await h.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    const before = (await dropped("endpoint-unavailable"));

    const result = await flushAnalytics(deps);
    expect(result.deliveryIds).toEqual([]);
    expect((await dropped("endpoint-unavailable")) - before).toBe(4);
    expect(await h.redis.exists(keys.inflight(endpoint.id), keys.buffer(endpoint.id))).toBe(0);
    expect(await h.redis.sismember(keys.pending, endpoint.id)).toBe(0);
    expect(await h.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(0);
    expect(receiver.received).toHaveLength(0);
  });
});
