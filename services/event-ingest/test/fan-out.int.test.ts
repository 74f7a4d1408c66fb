/**
 * The intake's fan-out, end to end: one delivery per (new event, enabled endpoint subscribed to
 * its type's subscription), stored with its final bytes, pending and due at once in
 * delivery_states; then one wake per endpoint that got deliveries: its drain job `d-<endpointId>`
 * in its shard, or, when that job exists already, a published wake (and its dirty flag). No job
 * per delivery. The pure part (matching, envelopes) has its table tests in src/fan-out.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { validateDelivered } from "@vw/contracts";
import { JOB_NAMES, drainJobId } from "@vw/queues";
import { buildEnvelope } from "@vw/webhook-core";
import { deliveriesWhere, type DeliveryView } from "./delivery-rows.js";
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
  // What is stored is checked here, not how fast Redis takes the wakes: on a loaded 2-core machine
  // a wake can take longer than the 5 s bound that turns a stalled Redis into a 503.
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
  const deliveries = await deliveriesWhere(api.prisma, { eventId: event.id });
  return { event, deliveries };
}

/** A delivery as the intake leaves it: pending, never attempted, due now, unclaimed, its bytes copied for the drain. */
function expectFreshlyPending(delivery: DeliveryView, before: number) {
  expect(delivery).toMatchObject({ status: "pending", attemptCount: 0, lastStatus: null, test: false });
  expect(delivery.state).toMatchObject({ status: "pending", run: 0, runAttempts: 0, attemptCount: 0, claimedUntil: null, waitReason: null, endpointId: delivery.endpointId });
  expect(delivery.state!.dueAt!.getTime()).toBeLessThanOrEqual(Date.now());
  expect(delivery.state!.dueAt!.getTime()).toBeGreaterThanOrEqual(before - 1000);
  expect(Buffer.from(delivery.state!.body!).equals(Buffer.from(delivery.body))).toBe(true);
}

describe("fan-out", () => {
  it("creates one delivery per enabled endpoint subscribed to the type's subscription, pending and due now, and a drain job for each of those endpoints in its shard", async () => {
    const visitor = makeEvent(world, "visitor.registered");
    const before = Date.now();
    const res = await api.post(visitor);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: 1, duplicates: 0, deliveries: 3 });

    const { event, deliveries } = await deliveriesOf(visitor.id);
    expect(event).toMatchObject({ type: "visitor.registered", occurredAt: new Date("2026-11-22T09:15:30.250Z") });
    expect(deliveries.map((d) => d.endpointId).sort()).toEqual([ep.visitor, ep.visitorConsent, ep.legacy].sort());
    for (const delivery of deliveries) {
      expect(delivery).toMatchObject({ worldId: world.id, type: "visitor.registered", eventProducerId: visitor.id });
      expectFreshlyPending(delivery, before);
    }

    // One drain job per endpoint, looked up in the endpoint's own shard: no job per delivery.
    for (const endpointId of [ep.visitor, ep.visitorConsent, ep.legacy]) {
      const job = await api.drainJob(endpointId!);
      expect(job?.name).toBe(JOB_NAMES.drain);
      expect(job?.data).toEqual({ endpointId });
      expect(await job?.getState()).toBe("waiting");
    }
    expect((await api.jobs()).map((j) => j.id).sort()).toEqual([ep.visitor, ep.visitorConsent, ep.legacy].map((id) => drainJobId(id!)).sort());
  });

  it("routes each type by its subscription: consent and recording events reach only their subscribers", async () => {
    const consent = makeEvent(world, "consent.changed");
    const recording = makeEvent(world, "recording.completed");
    const res = await api.post({ events: [consent, recording] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 0, deliveries: 2 });
    expect((await deliveriesOf(consent.id)).deliveries.map((d) => d.endpointId)).toEqual([ep.visitorConsent]);
    expect((await deliveriesOf(recording.id)).deliveries.map((d) => d.endpointId)).toEqual([ep.recording]);
    for (const endpointId of [ep.visitorConsent, ep.recording]) expect(await (await api.drainJob(endpointId!))?.getState()).toBe("waiting");
    expect(await api.drainJob(ep.authOnly!)).toBeUndefined();
  });

  it("stores the final envelope, and the same bytes for the drain: deliveryId = row id, the endpoint's apiVersion, the event's timestamp, world and data", async () => {
    const visitor = makeEvent(world, "visitor.registered", { timestamp: "2026-11-22T23:30:00-02:00" });
    await api.post(visitor);
    const { deliveries } = await deliveriesOf(visitor.id);
    const apiVersionOf: Record<string, string> = { [ep.visitor!]: "2026-11-01", [ep.visitorConsent!]: "2025-06-30", [ep.legacy!]: "2026-11-01" };
    expect(deliveries).toHaveLength(3);
    for (const delivery of deliveries) {
      const text = Buffer.from(delivery.body).toString("utf8");
      const body = JSON.parse(text);
      expect(Object.keys(body)).toEqual(["deliveryId", "apiVersion", "type", "timestamp", "world", "data"]);
      expect(body.deliveryId).toMatch(UUID_RE);
      expect(body.deliveryId).toBe(delivery.id);
      expect(delivery.state?.deliveryId).toBe(body.deliveryId);
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
      // What a drain claims and sends is the state's copy of those bytes.
      expect(Buffer.from(delivery.state!.body!).equals(expected)).toBe(true);
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

  it("gives a disabled endpoint no delivery and no drain job, and nothing after it is re-enabled (no catch-up)", async () => {
    const visitor = makeEvent(world, "visitor.registered");
    await api.post(visitor);
    expect(await api.prisma.webhookDelivery.count({ where: { endpointId: ep.disabled } })).toBe(0);
    expect((await api.jobs()).filter((job) => job.data.endpointId === ep.disabled)).toEqual([]);

    await api.prisma.webhookEndpoint.update({ where: { id: ep.disabled! }, data: { enabled: true, disabledReason: null, disabledAt: null } });
    try {
      const again = await api.post(visitor);
      expect(again.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
      expect(await api.prisma.webhookDelivery.count({ where: { endpointId: ep.disabled } })).toBe(0);
      expect(await api.prisma.deliveryState.count({ where: { endpointId: ep.disabled } })).toBe(0);
      // Enabled now, it does get new events, and is woken for them.
      const next = await api.post(makeEvent(world, "consent.changed"));
      expect(next.body).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });
      expect(await api.prisma.webhookDelivery.count({ where: { endpointId: ep.disabled } })).toBe(1);
      expect(await api.prisma.deliveryState.count({ where: { endpointId: ep.disabled, status: "pending" } })).toBe(1);
      expect((await api.drainJob(ep.disabled!))?.data).toEqual({ endpointId: ep.disabled });
    } finally {
      for (const job of await api.jobs()) if (job.data.endpointId === ep.disabled) await job.remove();
      await api.prisma.deliveryState.deleteMany({ where: { endpointId: ep.disabled } });
      await api.prisma.webhookDelivery.deleteMany({ where: { endpointId: ep.disabled } });
      await api.prisma.webhookEndpoint.update({ where: { id: ep.disabled! }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    }
  });

  it("accepts an event with no subscribed endpoint, creating no delivery and waking nothing", async () => {
    const lonely = await api.createWorld();
    await api.createEndpoint(lonely, { subscriptions: ["visitor"] });
    const jobs = (await api.jobs()).map((j) => j.id).sort();
    const res = await api.post(makeEvent(lonely, "recording.completed"));
    expect(res.body).toEqual({ accepted: 1, duplicates: 0, deliveries: 0 });
    expect((await api.jobs()).map((j) => j.id).sort()).toEqual(jobs);
  });

  it("wakes an endpoint whose drain job exists with a published wake and its flag, not a second job", async () => {
    const jobs = (await api.jobs()).map((j) => j.id).sort();
    expect(jobs).toContain(drainJobId(ep.recording!));
    await api.signals.takeFlag(ep.recording!);
    const wakes = await api.listenForWakes();
    const recording = wakes.register(ep.recording!);
    const visitor = wakes.register(ep.visitor!);
    try {
      expect((await api.post(makeEvent(world, "recording.completed"))).body).toEqual({ accepted: 1, duplicates: 0, deliveries: 1 });
      // The lingering drain would go on at once; the flag makes the next claim look again.
      expect(await recording.wait(20_000)).toBe(true);
      expect(await api.signals.takeFlag(ep.recording!)).toBe(true);
      expect((await api.jobs()).map((j) => j.id).sort()).toEqual(jobs);
      // Only the endpoints that got deliveries are woken.
      expect(visitor.woken).toBe(false);
    } finally {
      recording.release();
      visitor.release();
    }
  });

  it("has one pending, due state per delivery row and one drain job per endpoint that got deliveries", async () => {
    const worlds = [world.id, otherWorld.id, customWorld.id];
    const rows = await api.prisma.webhookDelivery.findMany({ where: { worldId: { in: worlds } }, select: { id: true, endpointId: true } });
    const states = await api.prisma.deliveryState.findMany({ where: { deliveryId: { in: rows.map((r) => r.id) } } });
    expect(states.map((s) => s.deliveryId).sort()).toEqual(rows.map((r) => r.id).sort());
    expect(states.every((s) => s.status === "pending" && s.dueAt !== null && s.dueAt.getTime() <= Date.now())).toBe(true);
    const endpoints = [...new Set(rows.map((r) => r.endpointId))];
    expect((await api.drainJobs()).map((job) => job.id).sort()).toEqual(endpoints.map(drainJobId).sort());
    expect(await api.queue.getJobCounts("waiting")).toEqual({ waiting: endpoints.length });
  });
});

describe("a full batch", () => {
  it("stores 500 events x 12 endpoints (6000 deliveries) in one request, and wakes each endpoint once", async () => {
    const big = await api.createWorld();
    const endpoints: string[] = [];
    for (let i = 0; i < 12; i += 1) endpoints.push(await api.createEndpoint(big, { subscriptions: ["visitor"] }));
    const events = Array.from({ length: 500 }, (_, i) => makeEvent(big, "visitor.registered", { id: `big-${i}` }));
    const started = Date.now();
    const res = await api.post({ events });
    const ms = Date.now() - started;
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: 500, duplicates: 0, deliveries: 6000 });
    expect(await api.prisma.webhookDelivery.count({ where: { worldId: big.id } })).toBe(6000);
    expect(await api.prisma.deliveryState.count({ where: { endpointId: { in: endpoints }, status: "pending" } })).toBe(6000);
    for (const endpointId of endpoints) expect(await api.prisma.deliveryState.count({ where: { endpointId } })).toBe(500);
    const jobs = (await api.jobs()).filter((job) => endpoints.includes(job.data.endpointId));
    expect(jobs.map((job) => job.id).sort()).toEqual(endpoints.map(drainJobId).sort());
    process.stdout.write(`[event-ingest] 500 events -> 6000 deliveries in ${ms} ms\n`);
  });
});
