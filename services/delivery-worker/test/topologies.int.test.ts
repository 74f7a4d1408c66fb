/**
 * The delivery path on the run's Sentinel group and 3-primary Cluster (packages/testing
 * test-topologies.ts), with the in-process worker serving its 16 delivery shards: a signed
 * delivery through its endpoint's drain job in the endpoint's shard, a hanging endpoint held to
 * its drain's window while a healthy one flows (fairness), and the analytics buffer flushed into
 * batches. On the Cluster, any key of a queue, a drain signal's script or the analytics buffer
 * outside its hash tag would fail here with CROSSSLOT. The full suites of each run on the standalone Redis; these are the representatives.
 */
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { HA_TEST_TOPOLOGIES, eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { drainJobId, pushWorldAnalyticsEvents } from "@vw/queues";
import { flushAnalytics } from "../src/analytics-flush.js";
import { silentLogger, startHarness, type Harness } from "./harness.js";

// Far longer than the test waits: the hanging endpoint's requests never end by themselves meanwhile.
const TIMEOUT_MS = 60_000;
const WINDOW = 4;

describe.each(HA_TEST_TOPOLOGIES)("on %s", (topology) => {
  let h: Harness;
  const receivers: WebhookReceiver[] = [];
  const receiver = async (answer: Parameters<typeof startWebhookReceiver>[0] extends infer O ? (O extends { answer?: infer A } ? A : never) : never) => {
    const r = await startWebhookReceiver({ answer });
    receivers.push(r);
    return r;
  };

  beforeAll(async () => {
    h = await startHarness({ topology, deliveryConcurrency: 2 * WINDOW, endpointConcurrency: WINDOW, deliveryTimeoutMs: TIMEOUT_MS, retryDelays: [60_000] });
  }, 60_000);
  afterAll(async () => {
    // Closed first: the hanging requests end (connection errors), so the worker closes at once.
    await Promise.all(receivers.map((r) => r.close()));
    await h?.close();
  });

  it("delivers a stored event, signed, through its endpoint's drain job in the endpoint's shard", async () => {
    // The receiver holds the request until the drain job has been looked at.
    const held: ServerResponse[] = [];
    const target = await receiver((_req, res) => void held.push(res));
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: target.url });
    target.setSecret(endpoint.secret);
    const deliveryId = await h.seedDelivery(endpoint);
    await target.waitFor(1);
    const shard = h.deliveries.queueFor(endpoint.id);
    expect(await shard.getJobState(drainJobId(endpoint.id))).toBe("active");
    held[0]!.statusCode = 204;
    held[0]!.end();
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    expect(target.received.map((r) => [r.headers["webhook-id"], r.verifyError])).toEqual([[deliveryId, null]]);
    // Out of work, the drain ends after its linger, and its job goes.
    await eventually("the endpoint's drain job ended", async () => (await shard.getJob(drainJobId(endpoint.id))) === undefined);
  });

  it("keeps a healthy endpoint flowing while another one hangs, held to its drain's window", async () => {
    const dead = await receiver("hang");
    const healthy = await receiver(204);
    const world = await h.createWorld();
    const deadEndpoint = await h.createEndpoint(world.id, { url: dead.url });
    const healthyEndpoint = await h.createEndpoint(world.id, { url: healthy.url });
    const deadIds: string[] = [];
    for (let i = 0; i < 20; i += 1) deadIds.push(await h.seedDelivery(deadEndpoint));
    await dead.waitFor(1);
    const healthyIds: string[] = [];
    for (let i = 0; i < 20; i += 1) healthyIds.push(await h.seedDelivery(healthyEndpoint));

    expect(await Promise.all(healthyIds.map(async (id) => (await h.settled(healthyEndpoint.id, id)).status))).toEqual(healthyIds.map(() => "delivered"));
    // Meanwhile the hanging endpoint had at most its window in flight; every one of its
    // deliveries is still pending (in flight, or waiting in PostgreSQL).
    expect(dead.received.length).toBeGreaterThan(0);
    expect(dead.received.length).toBeLessThanOrEqual(WINDOW);
    const states = await h.prisma.deliveryState.findMany({ where: { endpointId: deadEndpoint.id }, select: { status: true, attemptCount: true } });
    expect(states).toEqual(deadIds.map(() => ({ status: "pending", attemptCount: 0 })));
  });

  it("buffers a world's analytics for each of its endpoints and flushes them as batches", async () => {
    const targets = [await receiver(204), await receiver(204)];
    const world = await h.createWorld();
    const endpoints = await Promise.all(targets.map((t) => h.createEndpoint(world.id, { url: t.url, subscriptions: ["analytics"] })));
    targets.forEach((t, i) => t.setSecret(endpoints[i]!.secret));
    const events = Array.from({ length: 5 }, (_, n) => JSON.stringify({ type: "area.entered", timestamp: new Date().toISOString(), data: { n } }));
    const pushed = await pushWorldAnalyticsEvents(h.redis, h.keyPrefix, world.id, endpoints.map((e) => e.id), events, { perEndpointMax: 100, worldMax: 1000 });
    expect(pushed).toMatchObject({ buffered: 5, refused: 0 });

    const flushed = await flushAnalytics({
      redis: h.redis,
      sql: h.worker.db.sql,
      log: h.worker.db.log,
      signals: h.signals,
      keyPrefix: h.keyPrefix,
      playUrl: "https://play.example.test",
      batchMax: 100,
      logger: silentLogger,
      metrics: h.worker.metrics,
    });
    expect(flushed.deliveryIds).toHaveLength(2);
    const batches = await h.prisma.webhookDelivery.findMany({ where: { id: { in: flushed.deliveryIds } }, select: { id: true, endpointId: true } });
    expect(batches.map((b) => b.endpointId).sort()).toEqual(endpoints.map((e) => e.id).sort());
    expect(await Promise.all(batches.map(async (b) => (await h.settled(b.endpointId, b.id)).status))).toEqual(["delivered", "delivered"]);
    for (const t of targets) expect(JSON.parse(t.received[0]!.body.toString()).data.events).toHaveLength(5);
  });
});
