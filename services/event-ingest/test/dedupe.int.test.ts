import { createServer, type AddressInfo, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startIngest, type IngestHarness, type TestWorld } from "./harness.js";
import { makeEvent } from "./fixtures.js";

let api: IngestHarness;
let world: TestWorld;
let otherWorld: TestWorld;

beforeAll(async () => {
  api = await startIngest();
  world = await api.createWorld();
  otherWorld = await api.createWorld();
  await api.createEndpoint(world, { subscriptions: ["visitor", "consent"] });
  await api.createEndpoint(world, { subscriptions: ["visitor"] });
  await api.createEndpoint(otherWorld, { subscriptions: ["visitor"] });
});

afterAll(async () => {
  await api?.close();
});

async function deliveriesOf(producerId: string, worldId = world.id) {
  const event = await api.prisma.webhookEvent.findFirst({ where: { worldId, producerId } });
  if (!event) return [];
  return api.prisma.webhookDelivery.findMany({ where: { eventId: event.id }, orderBy: { id: "asc" } });
}

describe("deduplication on the producer's id", () => {
  it("counts the same id sent again as a duplicate and creates nothing", async () => {
    const event = makeEvent(world);
    expect((await api.post(event)).body).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });
    const before = await deliveriesOf(event.id);
    const jobsBefore = (await api.jobs()).length;

    // A retry may differ in content: the id alone decides.
    const again = await api.post({ ...event, timestamp: "2027-01-01T00:00:00Z" });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    expect(await api.prisma.webhookEvent.count({ where: { worldId: world.id, producerId: event.id } })).toBe(1);
    expect(await deliveriesOf(event.id)).toEqual(before);
    expect((await api.jobs()).length).toBe(jobsBefore);
  });

  it("counts an id repeated within one batch once, and the repeat as a duplicate", async () => {
    const event = makeEvent(world);
    const other = makeEvent(world, "consent.changed");
    const res = await api.post({ events: [event, other, { ...event, type: "consent.changed", data: other.data }] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 1, deliveries: 3 });
    const stored = await api.prisma.webhookEvent.findFirstOrThrow({ where: { worldId: world.id, producerId: event.id } });
    expect(stored.type).toBe("visitor.registered");
    expect(await deliveriesOf(event.id)).toHaveLength(2);
  });

  it("mixes new and known events in one batch", async () => {
    const known = makeEvent(world);
    await api.post(known);
    const res = await api.post({ events: [known, makeEvent(world), makeEvent(world, "consent.changed")] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 1, deliveries: 3 });
  });

  it("scopes ids to their world: the same id in two worlds is two events", async () => {
    const id = `shared-${Date.now()}`;
    const res = await api.post({ events: [makeEvent(world, "visitor.registered", { id }), makeEvent(otherWorld, "visitor.registered", { id })] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 0, deliveries: 3 });
  });

  it("stores an event once when two requests race with the same id", async () => {
    const event = makeEvent(world);
    const answers = await Promise.all([api.post(event), api.post(event), api.post({ events: [event] })]);
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202]);
    expect(answers.reduce((n, a) => n + a.body.accepted, 0)).toBe(1);
    expect(answers.reduce((n, a) => n + a.body.duplicates, 0)).toBe(2);
    expect(await deliveriesOf(event.id)).toHaveLength(2);
  });

  it("accepts each event once when concurrent batches share ids in opposite orders", async () => {
    const events = Array.from({ length: 200 }, () => makeEvent(world));
    const reversed = [...events].reverse();
    const answers = await Promise.all([events, reversed, events, reversed].map((batch) => api.post({ events: batch })));
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202]);
    expect(answers.reduce((n, a) => n + a.body.accepted, 0)).toBe(200);
    expect(answers.reduce((n, a) => n + a.body.duplicates, 0)).toBe(600);
    expect(answers.reduce((n, a) => n + a.body.deliveries, 0)).toBe(400);
  });
});

describe("crash repair: a retried event re-queues its never-attempted deliveries", () => {
  it("re-adds the job of a pending, never-attempted delivery whose job was lost", async () => {
    const event = makeEvent(world);
    await api.post(event);
    const [lost, kept] = await deliveriesOf(event.id);
    const lostJob = (await api.jobs()).find((job) => job.id === lost!.id);
    await lostJob!.remove();
    const keptJob = (await api.jobs()).find((job) => job.id === kept!.id);
    const keptTimestamp = keptJob!.timestamp;

    const retry = await api.post(event);
    expect(retry.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    const jobs = await api.jobs();
    const readded = jobs.find((job) => job.id === lost!.id);
    expect(readded?.data).toEqual({ deliveryId: lost!.id, endpointId: lost!.endpointId, run: 0 });
    expect(await readded?.getState()).toBe("waiting");
    // The job that still waited is the same job, not a second one.
    expect(jobs.filter((job) => job.id === kept!.id).map((job) => job.timestamp)).toEqual([keptTimestamp]);
    expect(await deliveriesOf(event.id)).toHaveLength(2);
  });

  it("leaves attempted, delivered and skipped deliveries alone", async () => {
    const event = makeEvent(world);
    await api.post(event);
    const [attempted, delivered] = await deliveriesOf(event.id);
    await api.prisma.webhookDelivery.updateMany({ where: { id: attempted!.id }, data: { attemptCount: 1, nextAttemptAt: new Date(Date.now() + 60_000) } });
    await api.prisma.webhookDelivery.updateMany({ where: { id: delivered!.id }, data: { status: "delivered", attemptCount: 1 } });
    for (const job of await api.jobs()) if (job.id === attempted!.id || job.id === delivered!.id) await job.remove();

    expect((await api.post(event)).body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    const ids = new Set((await api.jobs()).map((job) => job.id));
    expect(ids.has(attempted!.id)).toBe(false);
    expect(ids.has(delivered!.id)).toBe(false);

    await api.prisma.webhookDelivery.updateMany({ where: { id: attempted!.id }, data: { attemptCount: 0, status: "skipped" } });
    await api.post(event);
    expect((await api.jobs()).some((job) => job.id === attempted!.id)).toBe(false);
  });

  it("answers 503 when Redis refuses the jobs, keeps the rows, and the producer's retry queues them", async () => {
    const down = await startIngest({ keyPrefix: api.keyPrefix });
    const event = makeEvent(world);
    try {
      await down.queue.waitUntilReady();
      down.redis.disconnect();
      await new Promise<void>((resolve) => down.redis.once("end", () => resolve()));
      const res = await down.post(event);
      expect(res.status).toBe(503);
      expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(res.headers.get("retry-after")).toBe("2");
      expect(res.body).toMatchObject({ type: "/problems/dependency-unavailable", status: 503 });
      expect(res.body.errorId).toEqual(expect.any(String));
    } finally {
      await down.close();
    }
    const stored = await deliveriesOf(event.id);
    expect(stored).toHaveLength(2);
    expect(stored.every((d) => d.status === "pending" && d.attemptCount === 0)).toBe(true);
    const ids = () => api.jobs().then((jobs) => new Set(jobs.map((job) => job.id)));
    const before = await ids();
    expect(stored.filter((d) => before.has(d.id))).toEqual([]);

    const retry = await api.post(event);
    expect(retry.status).toBe(202);
    expect(retry.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    const after = await ids();
    expect(stored.every((d) => after.has(d.id))).toBe(true);
  });

  it("answers 503 when Redis does not answer within the enqueue timeout", async () => {
    // A server that accepts connections and never answers: the queue waits for Redis to be ready.
    const sockets = new Set<Socket>();
    const blackHole = createServer((socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => blackHole.listen(0, "127.0.0.1", resolve));
    const port = (blackHole.address() as AddressInfo).port;
    const silent = await startIngest({ keyPrefix: api.keyPrefix, redisUrl: `redis://127.0.0.1:${port}`, enqueueTimeoutMs: 300 });
    const event = makeEvent(world);
    try {
      const res = await silent.post(event);
      expect(res.status).toBe(503);
      expect(res.body.type).toBe("/problems/dependency-unavailable");
      const ready = await silent.request("GET", "/readyz", { token: null });
      expect(ready.status).toBe(503);
    } finally {
      await silent.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => blackHole.close(resolve));
    }
    expect(await deliveriesOf(event.id)).toHaveLength(2);
    expect((await api.post(event)).body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    const ids = new Set((await api.jobs()).map((job) => job.id));
    expect((await deliveriesOf(event.id)).every((d) => ids.has(d.id))).toBe(true);
  });
});
