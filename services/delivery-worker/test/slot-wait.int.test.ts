/**
 * A fast endpoint at its window: the worker's jobs wait in process for the next slot rather than
 * parking (SCHEDULER_SLOT_WAIT_MS), so a worker with more slots than an endpoint's window delivers
 * a burst to it without one park; with the wait set to 0 the same burst parks.
 */
import { afterAll, afterEach, beforeAll, expect, it } from "@jest/globals";
import { enqueueDeliveries } from "@vw/queues";
import { metricValue, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

let receiver: WebhookReceiver;
let h: Harness | undefined;
beforeAll(async () => {
  receiver = await startWebhookReceiver({ answer: 204 });
});
afterEach(async () => {
  await h?.close();
  h = undefined;
});
afterAll(async () => {
  await receiver.close();
});

/** 40 deliveries to one endpoint of window 2, through a worker running 12 at once. */
async function burst(slotWaitMs: number): Promise<{ parked: number; delivered: number }> {
  h = await startHarness({ deliveryConcurrency: 12, endpointConcurrency: 2, slotWaitMs });
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
  const ids: string[] = [];
  for (let i = 0; i < 40; i += 1) ids.push(await h.seedDelivery(endpoint, { enqueue: false }));
  // All queued at once, so the worker takes 12 of them together.
  await enqueueDeliveries(h.deliveries, ids.map((deliveryId) => ({ deliveryId, endpointId: endpoint.id, run: 0 })));
  const results = await Promise.all(ids.map((id) => h!.completion(id)));
  return { parked: await metricValue(h.worker.metrics.parked), delivered: results.filter((r) => r === "delivered").length };
}

it("waits for the endpoint's next slot instead of parking", async () => {
  // A wait far longer than a slot takes to free, even on a loaded machine.
  expect(await burst(10_000)).toEqual({ parked: 0, delivered: 40 });
}, 60_000);

it("parks at once with no wait (the same burst)", async () => {
  const { parked, delivered } = await burst(0);
  expect(delivered).toBe(40);
  expect(parked).toBeGreaterThan(0);
}, 60_000);
