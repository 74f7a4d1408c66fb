/** DELIVERY_RETENTION_DAYS: older deliveries (with their attempts) and dedupe records go, in bounded batches; newer ones stay. */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { runRetention } from "../src/retention.js";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
});
afterAll(async () => {
  await h.close();
});

it("deletes deliveries, attempts and events older than the retention, batch by batch, and keeps the rest", async () => {
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: "https://example.com/hook" });
  // Real time: the database is shared with the other test files, whose rows are all recent.
  const now = new Date();
  const day = 86_400_000;
  const ages = [200, 120, 91, 90.5, 89, 10];
  const ids: string[] = [];
  for (const age of ages) {
    const createdAt = new Date(now.getTime() - age * day);
    const event = await h.prisma.webhookEvent.create({
      data: { worldId: world.id, producerId: randomUUID(), type: "visitor.registered", occurredAt: createdAt, createdAt },
    });
    const id = await h.seedDelivery(endpoint, { enqueue: false });
    await h.prisma.webhookDelivery.update({ where: { id }, data: { createdAt, eventId: event.id } });
    await h.prisma.deliveryAttempt.create({
      data: {
        id: randomUUID(),
        deliveryId: id,
        attemptNumber: 1,
        trigger: "initial",
        startedAt: createdAt,
        requestHeaders: {},
        durationMs: 5,
        verdict: "delivered",
      },
    });
    ids.push(id);
  }
  const deleted = await runRetention(h.prisma, { retentionDays: 90, batchSize: 2, now });
  expect(deleted.deliveries).toBe(4);
  const left = await h.prisma.webhookDelivery.findMany({ where: { endpointId: endpoint.id } });
  expect(left.map((d) => d.id).sort()).toEqual(ids.slice(4).sort());
  expect(await h.prisma.deliveryAttempt.count({ where: { deliveryId: { in: ids.slice(0, 4) } } })).toBe(0);
  expect(await h.prisma.deliveryAttempt.count({ where: { deliveryId: { in: ids.slice(4) } } })).toBe(2);
  expect(await h.prisma.webhookEvent.count({ where: { worldId: world.id } })).toBe(2);
});

it("stops after maxBatches and lets the next run continue", async () => {
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: "https://example.com/hook" });
  const old = new Date("2000-01-01T00:00:00.000Z");
  for (let i = 0; i < 5; i += 1) {
    const id = await h.seedDelivery(endpoint, { enqueue: false });
    await h.prisma.webhookDelivery.update({ where: { id }, data: { createdAt: old } });
  }
  const first = await runRetention(h.prisma, { retentionDays: 90, batchSize: 2, maxBatches: 1 });
  expect(first.deliveries).toBe(2);
  expect(await h.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(3);
  await runRetention(h.prisma, { retentionDays: 90, batchSize: 2 });
  expect(await h.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(0);
});
