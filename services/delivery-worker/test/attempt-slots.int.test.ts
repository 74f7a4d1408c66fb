/**
 * DELIVERY_CONCURRENCY bounds the POSTs a worker has in flight, although the worker holds twice
 * as many jobs (the others wait for their log write): receivers never see more at once.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import type { WebhookReceiver } from "@vw/testing";
import { InFlight, countingReceiver, startHarness, type Harness } from "./harness.js";

const CONCURRENCY = 3;
let h: Harness;
const receivers: WebhookReceiver[] = [];
const inFlight = new InFlight();

beforeAll(async () => {
  // Windows wider than the process limit, so only DELIVERY_CONCURRENCY can hold the POSTs back.
  h = await startHarness({ deliveryConcurrency: CONCURRENCY, endpointConcurrency: 10 });
  for (let i = 0; i < 4; i += 1) receivers.push((await countingReceiver(40, inFlight)).receiver);
});
afterAll(async () => {
  await h.close();
  for (const r of receivers) await r.close();
});

it("never has more POSTs in flight than DELIVERY_CONCURRENCY, across all endpoints", async () => {
  const world = await h.createWorld();
  const jobs: { deliveryId: string; endpointId: string; run: number }[] = [];
  for (const receiver of receivers) {
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
    for (let i = 0; i < 6; i += 1) jobs.push({ deliveryId: await h.seedDelivery(endpoint, { enqueue: false }), endpointId: endpoint.id, run: 0 });
  }
  // All queued in one call: the worker has more than DELIVERY_CONCURRENCY to send at once.
  await h.enqueue(jobs);
  const ids = jobs.map((j) => j.deliveryId);
  const results = await Promise.all(ids.map((id) => h.completion(id)));
  expect(results).toEqual(ids.map(() => "delivered"));
  expect(receivers.reduce((n, r) => n + r.received.length, 0)).toBe(ids.length);
  // The limit is reached (24 deliveries queued at once), and never passed.
  expect(inFlight.most).toBe(CONCURRENCY);
  expect(inFlight.now).toBe(0);
});
