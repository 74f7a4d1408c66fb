/**
 * `/metrics` of the delivery worker after real deliveries to loopback receivers: the text
 * parses; a delivery raises the attempt counter, the duration and both lag histograms; a 410
 * counts as `gone` and disables its endpoint under reason `gone`; the queue gauges report every
 * queue (for the deliveries queue: drains, and timers as delayed), and the oldest waiting job's
 * age is the oldest job's; the backlog gauges read PostgreSQL's schedule of record (deliveries due
 * for more than 5 s); `vw_delivery_endpoints_slowed` counts the endpoints whose window a 429 or an
 * unreachable receiver shrank, by reason. No label names an endpoint or a world.
 */
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { JOB_NAMES, QUEUE_NAMES, drainJobId } from "@vw/queues";
import { closeServer, listen } from "@vw/service-kit";
import { eventually, findSamples, parsePrometheusText, sampleSum, startWebhookReceiver, type PromExposition, type WebhookReceiver } from "@vw/testing";
import { createWorkerApp } from "../src/app.js";
import { BACKLOG_AFTER_MS } from "../src/metrics.js";
import { silentLogger, startHarness, type Harness, type TestEndpoint } from "./harness.js";

let h: Harness;
let server: Server;
let url: string;
const receivers: WebhookReceiver[] = [];
const endpointIds: string[] = [];

beforeAll(async () => {
  // No reconciler: deliveries stored without a wake stay due and unsent until the test wakes them.
  h = await startHarness({ retryDelays: [100], reconcile: null });
  server = await listen(createWorkerApp({ pool: h.worker.db.pool, redis: h.redis, worker: h.worker, logger: silentLogger }), 0, "127.0.0.1");
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await closeServer(server);
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function scrape(): Promise<PromExposition> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await res.text());
}

async function endpointAt(targetUrl: string): Promise<TestEndpoint> {
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: targetUrl });
  endpointIds.push(endpoint.id, world.id);
  return endpoint;
}

async function endpointAnswering(status: number): Promise<{ endpoint: TestEndpoint; receiver: WebhookReceiver }> {
  const receiver = await startWebhookReceiver({ secret: null, answer: status });
  receivers.push(receiver);
  const endpoint = await endpointAt(receiver.url);
  receiver.setSecret(endpoint.secret);
  return { endpoint, receiver };
}

const delta = (after: PromExposition, before: PromExposition, name: string, labels: Record<string, string> = {}): number =>
  sampleSum(after, name, labels) - sampleSum(before, name, labels);

describe("GET /metrics on the delivery worker", () => {
  it("a delivery raises the attempt counter, the attempt duration and both lag histograms", async () => {
    const { endpoint } = await endpointAnswering(200);
    const before = await scrape();
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    const after = await scrape();

    expect(delta(after, before, "vw_delivery_attempts_total", { verdict: "delivered" })).toBe(1);
    expect(delta(after, before, "vw_delivery_attempt_duration_seconds_count")).toBe(1);
    expect(delta(after, before, "vw_delivery_first_attempt_lag_seconds_count")).toBe(1);
    expect(delta(after, before, "vw_delivery_success_lag_seconds_count")).toBe(1);
    // Lag is measured from the delivery's creation: positive, and within this test's span.
    const row = await h.prisma.webhookDelivery.findFirstOrThrow({ where: { id: deliveryId } });
    const lag = delta(after, before, "vw_delivery_success_lag_seconds_sum");
    expect(lag).toBeGreaterThan(0);
    expect(lag).toBeLessThanOrEqual((Date.now() - row.createdAt.getTime()) / 1000);
    expect(after.types.get("nodejs_eventloop_lag_seconds")).toBe("gauge");
  });

  it("a 410 counts as gone and disables the endpoint under reason gone; no success lag", async () => {
    const { endpoint } = await endpointAnswering(410);
    const before = await scrape();
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
    await eventually("the endpoint is disabled", async () => (await h.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: endpoint.id } })).enabled === false);
    const after = await scrape();

    expect(delta(after, before, "vw_delivery_attempts_total", { verdict: "gone" })).toBe(1);
    expect(delta(after, before, "vw_endpoints_disabled_total", { reason: "gone" })).toBe(1);
    expect(delta(after, before, "vw_endpoints_disabled_total", { reason: "failures" })).toBe(0);
    expect(delta(after, before, "vw_delivery_first_attempt_lag_seconds_count")).toBe(1);
    expect(delta(after, before, "vw_delivery_success_lag_seconds_count")).toBe(0);
  });

  it("reports every queue's depth and the age of its oldest waiting job; the deliveries queue's jobs are drains", async () => {
    // Paused for every worker (jobs stay in the wait list), so nothing takes them meanwhile.
    await Promise.all(h.deliveries.shards.map((q) => q.pause()));
    const enqueuedAt = Date.now();
    const added: { endpointId: string }[] = [];
    const drain = async (ageMs: number): Promise<void> => {
      const endpointId = randomUUID();
      await h.deliveries.queueFor(endpointId).add(JOB_NAMES.drain, { endpointId }, { jobId: drainJobId(endpointId), timestamp: enqueuedAt - ageMs });
      added.push({ endpointId });
    };
    // The older drain first, then a newer one: the gauge must report the older.
    await drain(60_000);
    await drain(1_000);
    const scrapeStart = Date.now();
    const exp = await scrape();
    const scrapeEnd = Date.now();
    try {
      for (const queue of Object.values(QUEUE_NAMES)) {
        for (const state of ["waiting", "active", "delayed", "prioritized", "failed"]) {
          expect(findSamples(exp, "vw_queue_jobs", { queue, state })).toHaveLength(1);
        }
        expect(findSamples(exp, "vw_queue_oldest_waiting_seconds", { queue })).toHaveLength(1);
      }
      // The states are BullMQ's own: the endpoint scheduler's "parked" is gone with it.
      expect(findSamples(exp, "vw_queue_jobs").map((s) => s.labels.state).filter((s) => !["waiting", "active", "delayed", "prioritized", "failed"].includes(s!))).toEqual([]);
      expect(sampleSum(exp, "vw_queue_jobs", { queue: QUEUE_NAMES.deliveries, state: "waiting" })).toBeGreaterThanOrEqual(2);
      const age = sampleSum(exp, "vw_queue_oldest_waiting_seconds", { queue: QUEUE_NAMES.deliveries });
      expect(age).toBeGreaterThanOrEqual((scrapeStart - (enqueuedAt - 60_000)) / 1000);
      expect(age).toBeLessThanOrEqual((scrapeEnd - (enqueuedAt - 60_000)) / 1000);
      expect(sampleSum(exp, "vw_queue_oldest_waiting_seconds", { queue: QUEUE_NAMES.notifications })).toBe(0);
    } finally {
      for (const { endpointId } of added) await (await h.deliveries.queueFor(endpointId).getJob(drainJobId(endpointId)))?.remove();
      await Promise.all(h.deliveries.shards.map((q) => q.resume()));
    }
  });

  it("reports the backlog from PostgreSQL: endpoints with deliveries due for more than 5 s, and how long the oldest has been due", async () => {
    const { endpoint, receiver } = await endpointAnswering(204);
    const before = await scrape();
    expect(sampleSum(before, "vw_delivery_backlog_endpoints")).toBe(0);
    expect(sampleSum(before, "vw_delivery_backlog_oldest_age_seconds")).toBe(0);
    // Stored and due, but nobody woke the endpoint (a producer killed before its wake).
    const ids = [await h.seedDelivery(endpoint, { wake: false }), await h.seedDelivery(endpoint, { wake: false })];
    const storedAt = Date.now();
    const backlogged = await eventually(
      "the endpoint counts as backlogged",
      async () => {
        const exp = await scrape();
        return sampleSum(exp, "vw_delivery_backlog_endpoints") === 1 ? exp : null;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const age = sampleSum(backlogged, "vw_delivery_backlog_oldest_age_seconds");
    expect(age).toBeGreaterThan(BACKLOG_AFTER_MS / 1000);
    expect(age).toBeLessThanOrEqual((Date.now() - storedAt) / 1000 + 1);
    expect(receiver.received).toHaveLength(0);

    await h.wake([endpoint.id]);
    for (const id of ids) expect((await h.settled(endpoint.id, id)).status).toBe("delivered");
    const after = await scrape();
    expect(sampleSum(after, "vw_delivery_backlog_endpoints")).toBe(0);
    expect(sampleSum(after, "vw_delivery_backlog_oldest_age_seconds")).toBe(0);
  }, 60_000);

  it("counts the endpoints whose window shrank, by reason: a 429 (throttled), a receiver that cannot be reached (unresponsive)", async () => {
    const before = await scrape();
    expect(sampleSum(before, "vw_delivery_endpoints_slowed", { reason: "throttled" })).toBe(0);
    expect(sampleSum(before, "vw_delivery_endpoints_slowed", { reason: "unresponsive" })).toBe(0);
    const { endpoint: throttled } = await endpointAnswering(429);
    // A port that was just closed: connections are refused.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const unreachable = await endpointAt(`http://127.0.0.1:${port}/hook`);

    const throttledId = await h.seedDelivery(throttled);
    const unreachableId = await h.seedDelivery(unreachable);
    expect((await h.settled(throttled.id, throttledId, ["failed"])).attemptCount).toBe(2);
    expect((await h.settled(unreachable.id, unreachableId, ["failed"])).attemptCount).toBe(2);
    const after = await eventually("both slowdowns are counted", async () => {
      const exp = await scrape();
      return sampleSum(exp, "vw_delivery_endpoints_slowed", { reason: "throttled" }) === 1 && sampleSum(exp, "vw_delivery_endpoints_slowed", { reason: "unresponsive" }) === 1 ? exp : null;
    });
    expect(findSamples(after, "vw_delivery_endpoints_slowed").map((s) => s.labels)).toEqual(
      expect.arrayContaining([{ reason: "throttled" }, { reason: "unresponsive" }]),
    );
    expect(findSamples(after, "vw_delivery_endpoints_slowed")).toHaveLength(2);
    // What the dashboard's endpoint page reads: each window as its drain stored it.
    expect(await h.signals.loadWindow(throttled.id)).toMatchObject({ reason: "throttled" });
    expect(await h.signals.loadWindow(unreachable.id)).toMatchObject({ reason: "unresponsive" });
  });

  it("names no endpoint or world in any label", async () => {
    const exp = await scrape();
    expect(endpointIds.length).toBeGreaterThan(0);
    const named = exp.samples.filter((s) => Object.values(s.labels).some((v) => endpointIds.includes(String(v))));
    expect(named).toEqual([]);
  });
});
