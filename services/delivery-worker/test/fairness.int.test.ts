/**
 * One dead endpoint never holds up the others: with the worker's slots fewer than the dead
 * endpoint's backlog, a healthy endpoint's deliveries still go out while the dead one's requests
 * hang, and the dead endpoint never has more than its share in flight.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { metricValue, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

// Long enough that the dead endpoint's first requests do not time out (and free their slots)
// while the healthy deliveries run, even on a loaded machine.
const TIMEOUT_MS = 10_000;
let h: Harness;
let dead: WebhookReceiver;
let healthy: WebhookReceiver;

beforeAll(async () => {
  h = await startHarness({ deliveryConcurrency: 8, endpointConcurrency: 4, deliveryTimeoutMs: TIMEOUT_MS, retryDelays: [60_000] });
  dead = await startWebhookReceiver({ answer: "hang" });
  healthy = await startWebhookReceiver({ answer: 204 });
});
afterAll(async () => {
  await h.close();
  await dead.close();
  await healthy.close();
});

it("keeps a healthy endpoint flowing while another one hangs on every request", async () => {
  const world = await h.createWorld();
  const deadEndpoint = await h.createEndpoint(world.id, { url: dead.url });
  const healthyEndpoint = await h.createEndpoint(world.id, { url: healthy.url });
  // The dead endpoint's backlog is queued first and is larger than the worker's 8 slots.
  for (let i = 0; i < 30; i += 1) await h.seedDelivery(deadEndpoint);
  const healthyIds: string[] = [];
  for (let i = 0; i < 40; i += 1) healthyIds.push(await h.seedDelivery(healthyEndpoint));

  const results = await Promise.all(healthyIds.map((id) => h.completion(id)));
  expect(results.every((r) => r === "delivered")).toBe(true);
  expect(healthy.received).toHaveLength(40);
  // The dead endpoint got at most its per-endpoint share of requests, all still hanging.
  expect(dead.received.length).toBeGreaterThan(0);
  expect(dead.received.length).toBeLessThanOrEqual(4);
  // Every healthy delivery was answered while the dead endpoint's first requests still hung: none
  // of them has ended (timed out and been logged), so no healthy delivery waited for a slot they held.
  expect(await h.prisma.deliveryAttempt.count({ where: { endpointId: deadEndpoint.id } })).toBe(0);
  expect(await metricValue(h.worker.metrics.parked)).toBeGreaterThan(0);
  // The rest of the dead endpoint's backlog waits parked (in BullMQ's delayed set), not in the
  // wait list in front of the others' jobs.
  const backlog = await h.worker.backlog();
  expect(backlog.backloggedEndpoints).toBe(1);
  expect(backlog.parkedJobs).toBe(30 - dead.received.length);
  expect((await Promise.all(h.deliveries.shards.map((q) => q.getJobCounts("waiting")))).every((c) => c.waiting === 0)).toBe(true);
  // The operator sees it on /metrics: parked apart from the delayed retries, and the backlog gauges.
  const text = await h.worker.serviceMetrics.registry.metrics();
  expect(text).toContain(`vw_queue_jobs{queue="webhook-deliveries",state="parked"} ${backlog.parkedJobs}`);
  expect(text).toContain(`vw_queue_jobs{queue="webhook-deliveries",state="delayed"} 0`);
  expect(text).toContain("vw_delivery_backlog_endpoints 1");
  expect(text).toMatch(/^vw_delivery_backlog_oldest_age_seconds \d+(\.\d+)?$/m);
});
