/**
 * The delivery path on the run's Sentinel group and 3-primary Cluster (packages/testing
 * test-topologies.ts), with the in-process worker serving its 16 delivery shards: a signed
 * delivery, the endpoint scheduler's window and backlog keeping a hanging endpoint from holding
 * up a healthy one (fairness), and the analytics buffer flushed into batches. On the Cluster, any
 * key of a queue, a script or the analytics buffer outside its hash tag would fail here with
 * CROSSSLOT. The full suites of each run on the standalone Redis; these are the representatives.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { HA_TEST_TOPOLOGIES, eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { pushWorldAnalyticsEvents } from "@vw/queues";
import { flushAnalytics } from "../src/analytics-flush.js";
import { silentLogger, startHarness, type Harness } from "./harness.js";

const TIMEOUT_MS = 10_000;

describe.each(HA_TEST_TOPOLOGIES)("on %s", (topology) => {
  let h: Harness;
  const receivers: WebhookReceiver[] = [];
  const receiver = async (answer: 204 | "hang") => {
    const r = await startWebhookReceiver({ answer });
    receivers.push(r);
    return r;
  };

  beforeAll(async () => {
    h = await startHarness({ topology, deliveryConcurrency: 8, endpointConcurrency: 4, deliveryTimeoutMs: TIMEOUT_MS, retryDelays: [60_000] });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  it("delivers a stored event, signed, through the endpoint's shard", async () => {
    const target = await receiver(204);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: target.url });
    target.setSecret(endpoint.secret);
    const deliveryId = await h.seedDelivery(endpoint);
    expect(await h.completion(deliveryId)).toBe("delivered");
    expect(target.received.map((r) => r.headers["webhook-id"])).toEqual([deliveryId]);
    expect(await h.deliveries.queueFor(endpoint.id).getJob(deliveryId)).toBeUndefined();
  });

  it("keeps a healthy endpoint flowing while another one hangs, its backlog parked in its shard", async () => {
    const dead = await receiver("hang");
    const healthy = await receiver(204);
    const world = await h.createWorld();
    const deadEndpoint = await h.createEndpoint(world.id, { url: dead.url });
    const healthyEndpoint = await h.createEndpoint(world.id, { url: healthy.url });
    for (let i = 0; i < 20; i += 1) await h.seedDelivery(deadEndpoint);
    const healthyIds: string[] = [];
    for (let i = 0; i < 20; i += 1) healthyIds.push(await h.seedDelivery(healthyEndpoint));

    expect(await Promise.all(healthyIds.map((id) => h.completion(id)))).toEqual(healthyIds.map(() => "delivered"));
    // The hanging endpoint has at most its window in flight; the rest waits parked.
    expect(dead.received.length).toBeGreaterThan(0);
    expect(dead.received.length).toBeLessThanOrEqual(4);
    await eventually("the hanging endpoint's backlog is parked", async () => (await h.worker.backlog()).parkedJobs === 20 - dead.received.length);
    expect(await h.worker.schedulerFor(deadEndpoint.id).inUse(deadEndpoint.id)).toBe(dead.received.length);
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
      deliveries: h.deliveries,
      keyPrefix: h.keyPrefix,
      playUrl: "https://play.example.test",
      batchMax: 100,
      logger: silentLogger,
      metrics: h.worker.metrics,
    });
    expect(flushed.deliveryIds).toHaveLength(2);
    expect(await Promise.all(flushed.deliveryIds.map((id) => h.completion(id)))).toEqual(["delivered", "delivered"]);
    for (const t of targets) expect(JSON.parse(t.received[0]!.body.toString()).data.events).toHaveLength(5);
  });
});
