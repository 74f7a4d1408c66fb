/**
 * `/metrics` of the delivery worker after real deliveries to loopback receivers: the text
 * parses; a delivery raises the attempt counter, the duration and both lag histograms; a 410
 * counts as `gone` and disables its endpoint under reason `gone`; the queue gauges report every
 * queue, and the oldest waiting job's age is the oldest job's, not the newest's.
 */
import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { JOB_NAMES, QUEUE_NAMES, type DeliverJobData } from "@vw/queues";
import { closeServer, listen } from "@vw/service-kit";
import { findSamples, parsePrometheusText, sampleSum, startWebhookReceiver, type PromExposition, type WebhookReceiver } from "@vw/testing";
import { createWorkerApp } from "../src/app.js";
import { silentLogger, startHarness, type Harness } from "./harness.js";

let h: Harness;
let server: Server;
let url: string;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  h = await startHarness({ retryDelays: [100] });
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

async function endpointAnswering(status: number) {
  const receiver = await startWebhookReceiver({ secret: null, answer: status });
  receivers.push(receiver);
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
  receiver.setSecret(endpoint.secret);
  return endpoint;
}

const delta = (after: PromExposition, before: PromExposition, name: string, labels: Record<string, string> = {}): number =>
  sampleSum(after, name, labels) - sampleSum(before, name, labels);

describe("GET /metrics on the delivery worker", () => {
  it("a delivery raises the attempt counter, the attempt duration and both lag histograms", async () => {
    const endpoint = await endpointAnswering(200);
    const before = await scrape();
    const deliveryId = await h.seedDelivery(endpoint);
    expect(await h.completion(deliveryId)).toBe("delivered");
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
    const endpoint = await endpointAnswering(410);
    const before = await scrape();
    const deliveryId = await h.seedDelivery(endpoint);
    expect(await h.completion(deliveryId)).toBe("failed");
    const after = await scrape();

    expect(delta(after, before, "vw_delivery_attempts_total", { verdict: "gone" })).toBe(1);
    expect(delta(after, before, "vw_endpoints_disabled_total", { reason: "gone" })).toBe(1);
    expect(delta(after, before, "vw_endpoints_disabled_total", { reason: "failures" })).toBe(0);
    expect(delta(after, before, "vw_delivery_first_attempt_lag_seconds_count")).toBe(1);
    expect(delta(after, before, "vw_delivery_success_lag_seconds_count")).toBe(0);
    // Nothing is labelled by endpoint or world.
    expect(after.samples.some((s) => Object.values(s.labels).includes(endpoint.id))).toBe(false);
  });

  it("reports every queue's depth and the age of its oldest waiting job", async () => {
    // Paused for every worker (jobs stay in the wait list), so nothing takes them meanwhile.
    await Promise.all(h.deliveries.shards.map((q) => q.pause()));
    const enqueuedAt = Date.now();
    const job = (ageMs: number): Promise<unknown> => {
      const data: DeliverJobData = { deliveryId: randomUUID(), endpointId: randomUUID(), run: 0 };
      return h.deliveries.queueFor(data.endpointId).add(JOB_NAMES.deliver, data, { jobId: data.deliveryId, timestamp: enqueuedAt - ageMs });
    };
    // The older job first, then a newer one: the gauge must report the older.
    await job(60_000);
    await job(1_000);
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
      expect(sampleSum(exp, "vw_queue_jobs", { queue: QUEUE_NAMES.deliveries, state: "waiting" })).toBeGreaterThanOrEqual(2);
      const age = sampleSum(exp, "vw_queue_oldest_waiting_seconds", { queue: QUEUE_NAMES.deliveries });
      expect(age).toBeGreaterThanOrEqual((scrapeStart - (enqueuedAt - 60_000)) / 1000);
      expect(age).toBeLessThanOrEqual((scrapeEnd - (enqueuedAt - 60_000)) / 1000);
      expect(sampleSum(exp, "vw_queue_oldest_waiting_seconds", { queue: QUEUE_NAMES.notifications })).toBe(0);
    } finally {
      await Promise.all(h.deliveries.shards.map((q) => q.resume()));
    }
  });
});
