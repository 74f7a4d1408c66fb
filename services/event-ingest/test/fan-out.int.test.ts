import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { validateDelivered } from "@vw/contracts";
import { JOB_NAMES } from "@vw/queues";
import { buildEnvelope } from "@vw/webhook-core";
import { PLAY_URL, startIngest, type IngestHarness, type TestWorld } from "./harness.js";
import { CONSENT_DATA, RECORDING_DATA, VISITOR_DATA, makeEvent } from "./fixtures.js";

/** A UUIDv7: deliveryIds carry their creation time (it names the daily partition of the row). */
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let api: IngestHarness;
let world: TestWorld;
let otherWorld: TestWorld;
let customWorld: TestWorld;
const ep: Record<string, string> = {};

beforeAll(async () => {
  // What is stored is checked here, not how fast Redis takes it: a batch of 6,000 jobs on a loaded
  // 2-core machine can take longer than the 5 s bound that turns a stalled Redis into a 503.
  api = await startIngest({ enqueueTimeoutMs: 60_000 });
  world = await api.createWorld();
  otherWorld = await api.createWorld();
  customWorld = await api.createWorld({ customDomain: `${api.keyPrefix}.worlds.example.test` });
  ep.visitor = await api.createEndpoint(world, { subscriptions: ["visitor"] });
  ep.visitorConsent = await api.createEndpoint(world, { subscriptions: ["visitor", "consent"], apiVersion: "2025-06-30" });
  ep.recording = await api.createEndpoint(world, { subscriptions: ["recording", "analytics"] });
  ep.disabled = await api.createEndpoint(world, { subscriptions: ["visitor", "consent", "recording"], enabled: false });
  ep.legacy = await api.createEndpoint(world, { subscriptions: ["auth", "visitor"], format: "legacy" });
  ep.authOnly = await api.createEndpoint(world, { subscriptions: ["auth", "analytics"] });
  ep.other = await api.createEndpoint(otherWorld, { subscriptions: ["visitor", "consent", "recording"] });
  ep.custom = await api.createEndpoint(customWorld, { subscriptions: ["consent"] });
});

afterAll(async () => {
  await api?.close();
});

async function deliveriesOf(producerId: string, worldId = world.id) {
  const event = await api.prisma.webhookEvent.findFirstOrThrow({ where: { worldId, producerId } });
  const deliveries = await api.prisma.webhookDelivery.findMany({ where: { eventId: event.id } });
  return { event, deliveries };
}

async function jobsByDeliveryId() {
  return new Map((await api.jobs()).map((job) => [job.id, job]));
}

describe("fan-out", () => {
  it("creates one delivery and one job per enabled endpoint subscribed to the type's subscription", async () => {
    const visitor = makeEvent(world, "visitor.registered");
    const res = await api.post(visitor);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: 1, duplicates: 0, deliveries: 3 });

    const { event, deliveries } = await deliveriesOf(visitor.id);
    expect(event).toMatchObject({ type: "visitor.registered", occurredAt: new Date("2026-11-22T09:15:30.250Z") });
    expect(deliveries.map((d) => d.endpointId).sort()).toEqual([ep.visitor, ep.visitorConsent, ep.legacy].sort());
    for (const delivery of deliveries) {
      expect(delivery).toMatchObject({ worldId: world.id, type: "visitor.registered", status: "pending", attemptCount: 0, test: false });
    }

    const jobs = await jobsByDeliveryId();
    for (const delivery of deliveries) {
      const job = jobs.get(delivery.id);
      expect(job?.name).toBe(JOB_NAMES.deliver);
      expect(job?.data).toEqual({ deliveryId: delivery.id, endpointId: delivery.endpointId, run: 0 });
      expect(await job?.getState()).toBe("waiting");
    }
  });

  it("routes each type by its subscription: consent and recording events reach only their subscribers", async () => {
    const consent = makeEvent(world, "consent.changed");
    const recording = makeEvent(world, "recording.completed");
    const res = await api.post({ events: [consent, recording] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 0, deliveries: 2 });
    expect((await deliveriesOf(consent.id)).deliveries.map((d) => d.endpointId)).toEqual([ep.visitorConsent]);
    expect((await deliveriesOf(recording.id)).deliveries.map((d) => d.endpointId)).toEqual([ep.recording]);
  });

  it("stores the final envelope: deliveryId = row id = job's, the endpoint's apiVersion, the event's timestamp, world and data", async () => {
    const visitor = makeEvent(world, "visitor.registered", { timestamp: "2026-11-22T23:30:00-02:00" });
    await api.post(visitor);
    const { deliveries } = await deliveriesOf(visitor.id);
    const jobs = await jobsByDeliveryId();
    const apiVersionOf: Record<string, string> = { [ep.visitor!]: "2026-11-01", [ep.visitorConsent!]: "2025-06-30", [ep.legacy!]: "2026-11-01" };
    expect(deliveries).toHaveLength(3);
    for (const delivery of deliveries) {
      const text = Buffer.from(delivery.body).toString("utf8");
      const body = JSON.parse(text);
      expect(Object.keys(body)).toEqual(["deliveryId", "apiVersion", "type", "timestamp", "world", "data"]);
      expect(body.deliveryId).toMatch(UUID_RE);
      expect(body.deliveryId).toBe(delivery.id);
      expect(jobs.get(delivery.id)?.data.deliveryId).toBe(body.deliveryId);
      expect(body.apiVersion).toBe(apiVersionOf[delivery.endpointId]);
      expect(body.type).toBe("visitor.registered");
      expect(body.timestamp).toBe("2026-11-23T01:30:00.000Z");
      expect(body.world).toEqual({ slug: world.slug, url: `${PLAY_URL}/@/${world.organizationSlug}/${world.slug}` });
      expect(body.data).toEqual(VISITOR_DATA);
      expect(validateDelivered("visitor.registered", body)).toMatchObject({ ok: true });
      // The stored bytes are exactly the envelope every attempt signs and sends (UTF-8, compact).
      const expected = buildEnvelope({
        deliveryId: delivery.id,
        apiVersion: apiVersionOf[delivery.endpointId]!,
        type: "visitor.registered",
        timestamp: "2026-11-23T01:30:00.000Z",
        world: { slug: world.slug, url: `${PLAY_URL}/@/${world.organizationSlug}/${world.slug}` },
        data: VISITOR_DATA,
      });
      expect(Buffer.from(delivery.body).equals(expected)).toBe(true);
    }
    // Legacy-format endpoints get the envelope for these types too (the spec's legacy body is member.connecting's).
    expect(deliveries.find((d) => d.endpointId === ep.legacy)).toBeDefined();
  });

  it("gives a world with a custom domain its domain as world.url", async () => {
    const consent = makeEvent(customWorld, "consent.changed");
    const res = await api.post(consent);
    expect(res.body).toEqual({ accepted: 1, duplicates: 0, deliveries: 1 });
    const { deliveries } = await deliveriesOf(consent.id, customWorld.id);
    const body = JSON.parse(Buffer.from(deliveries[0]!.body).toString("utf8"));
    expect(body.world).toEqual({ slug: customWorld.slug, url: `https://${api.keyPrefix}.worlds.example.test/` });
    expect(body.data).toEqual(CONSENT_DATA);
  });

  it("fans a batch out per world: events of another world reach only that world's endpoints", async () => {
    const mine = makeEvent(world, "recording.completed");
    const theirs = makeEvent(otherWorld, "recording.completed");
    const res = await api.post({ events: [mine, theirs] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 0, deliveries: 2 });
    expect((await deliveriesOf(mine.id)).deliveries.map((d) => d.endpointId)).toEqual([ep.recording]);
    const other = (await deliveriesOf(theirs.id, otherWorld.id)).deliveries;
    expect(other.map((d) => d.endpointId)).toEqual([ep.other]);
    expect(JSON.parse(Buffer.from(other[0]!.body).toString("utf8")).data).toEqual(RECORDING_DATA);
  });

  it("gives a disabled endpoint no delivery and no job, and nothing after it is re-enabled (no catch-up)", async () => {
    const visitor = makeEvent(world, "visitor.registered");
    await api.post(visitor);
    expect(await api.prisma.webhookDelivery.count({ where: { endpointId: ep.disabled } })).toBe(0);
    expect((await api.jobs()).filter((job) => job.data.endpointId === ep.disabled)).toEqual([]);

    await api.prisma.webhookEndpoint.update({ where: { id: ep.disabled! }, data: { enabled: true, disabledReason: null, disabledAt: null } });
    try {
      const again = await api.post(visitor);
      expect(again.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
      expect(await api.prisma.webhookDelivery.count({ where: { endpointId: ep.disabled } })).toBe(0);
      // Enabled now, it does get new events.
      const next = await api.post(makeEvent(world, "consent.changed"));
      expect(next.body).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });
      expect(await api.prisma.webhookDelivery.count({ where: { endpointId: ep.disabled } })).toBe(1);
    } finally {
      for (const job of await api.jobs()) if (job.data.endpointId === ep.disabled) await job.remove();
      await api.prisma.webhookDelivery.deleteMany({ where: { endpointId: ep.disabled } });
      await api.prisma.webhookEndpoint.update({ where: { id: ep.disabled! }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    }
  });

  it("accepts an event with no subscribed endpoint, creating no delivery", async () => {
    const lonely = await api.createWorld();
    const res = await api.post(makeEvent(lonely, "recording.completed"));
    expect(res.body).toEqual({ accepted: 1, duplicates: 0, deliveries: 0 });
  });

  it("has exactly one job per delivery row", async () => {
    const rows = await api.prisma.webhookDelivery.findMany({ where: { worldId: { in: [world.id, otherWorld.id, customWorld.id] } }, select: { id: true } });
    const jobs = await api.jobs();
    expect(jobs.map((job) => job.id).sort()).toEqual(rows.map((row) => row.id).sort());
    expect(await api.queue.getJobCounts("waiting")).toEqual({ waiting: rows.length });
  });
});

describe("a full batch", () => {
  it("stores 500 events x 12 endpoints (6000 deliveries) in one request", async () => {
    const big = await api.createWorld();
    for (let i = 0; i < 12; i += 1) await api.createEndpoint(big, { subscriptions: ["visitor"] });
    const events = Array.from({ length: 500 }, (_, i) => makeEvent(big, "visitor.registered", { id: `big-${i}` }));
    const started = Date.now();
    const res = await api.post({ events });
    const ms = Date.now() - started;
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: 500, duplicates: 0, deliveries: 6000 });
    expect(await api.prisma.webhookDelivery.count({ where: { worldId: big.id } })).toBe(6000);
    const jobs = (await api.jobs()).filter((job) => job.data.endpointId !== undefined);
    const rows = await api.prisma.webhookDelivery.findMany({ where: { worldId: big.id }, select: { id: true } });
    const jobIds = new Set(jobs.map((job) => job.id));
    expect(rows.every((row) => jobIds.has(row.id))).toBe(true);
    process.stdout.write(`[event-ingest] 500 events -> 6000 deliveries in ${ms} ms\n`);
  });
});
