import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { EVENT_TYPES } from "@vw/contracts";
import { startIngest, type IngestHarness, type TestWorld } from "./harness.js";
import { VISITOR_DATA, makeEvent } from "./fixtures.js";

let api: IngestHarness;
let world: TestWorld;

beforeAll(async () => {
  api = await startIngest({ maxEventsPerRequest: 3 });
  world = await api.createWorld();
  await api.createEndpoint(world, { subscriptions: ["visitor", "consent", "recording", "analytics", "auth"] });
});

afterAll(async () => {
  await api?.close();
});

/** Nothing of the world reached the database or the queue. */
async function expectNothingAccepted(): Promise<void> {
  expect(await api.prisma.webhookEvent.count({ where: { worldId: world.id } })).toBe(0);
  expect(await api.prisma.webhookDelivery.count({ where: { worldId: world.id } })).toBe(0);
  expect(Object.values(await api.queue.getJobCounts("waiting", "delayed", "prioritized", "active")).reduce((a, b) => a + b, 0)).toBe(0);
}

const pointersOf = (body: { errors: { pointer: string }[] }) => body.errors.map((e) => e.pointer).sort();

describe("POST /v1/events validation", () => {
  it("lists every bad member of a single event with JSON pointers and accepts nothing", async () => {
    const res = await api.post({
      id: "x".repeat(201),
      world: "Not A World",
      type: "visitor.registered",
      timestamp: "2026-11-22 25:00",
      data: { ...VISITOR_DATA, email: "nope", via: "carrier-pigeon", extra: true },
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ type: "/problems/invalid-request", status: 400, instance: "/v1/events" });
    expect(pointersOf(res.body)).toEqual(["/data/email", "/data/extra", "/data/via", "/id", "/timestamp", "/world"]);
    await expectNothingAccepted();
  });

  it("lists every bad member of every event of a batch, and accepts none of the valid ones", async () => {
    const res = await api.post({
      events: [
        makeEvent(world),
        makeEvent(world, "consent.changed", { data: { uuid: "u", email: "grace@example.org", type: "robot", purpose: "newsletter" } }),
        makeEvent(world, "visitor.registered", { id: "", timestamp: "2026-02-30T10:00:00Z", data: { ...VISITOR_DATA, email: "nope" } }),
      ],
    });
    expect(res.status).toBe(400);
    expect(pointersOf(res.body)).toEqual(["/events/1/data/granted", "/events/1/data/type", "/events/2/data/email", "/events/2/id", "/events/2/timestamp"]);
    expect(res.body.errors.find((e: { pointer: string }) => e.pointer === "/events/1/data/granted").detail).toBe("is required");
    await expectNothingAccepted();
  });

  it("refuses more events than MAX_EVENTS_PER_REQUEST, and an empty batch", async () => {
    const tooMany = await api.post({ events: [makeEvent(world), makeEvent(world), makeEvent(world), makeEvent(world)] });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.errors).toEqual([{ pointer: "/events", detail: "must have at most 3 events, got 4" }]);
    const empty = await api.post({ events: [] });
    expect(empty.status).toBe(400);
    expect(empty.body.errors).toEqual([{ pointer: "/events", detail: "must have at least 1 event" }]);
    await expectNothingAccepted();
  });

  it("refuses an unknown type, naming the accepted ones", async () => {
    const res = await api.post(makeEvent(world, "visitor.registered", { type: "visitor.deleted" }));
    expect(res.status).toBe(400);
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].pointer).toBe("/type");
    for (const type of EVENT_TYPES) expect(res.body.errors[0].detail).toContain(type);
    await expectNothingAccepted();
  });

  it("refuses the delivered-only types, saying which route takes them", async () => {
    const res = await api.post({
      events: [
        makeEvent(world, "visitor.registered", { type: "member.connecting", data: { roomUrl: "https://play.example.test/@/a/b/r.wam", uuid: "m", accessTokens: [] } }),
        makeEvent(world, "visitor.registered", { type: "analytics.batch", data: { events: [] } }),
        makeEvent(world, "visitor.registered", { type: "ping", data: {} }),
      ],
    });
    expect(res.status).toBe(400);
    const details = Object.fromEntries(res.body.errors.map((e: { pointer: string; detail: string }) => [e.pointer, e.detail]));
    expect(Object.keys(details).sort()).toEqual(["/events/0/type", "/events/1/type", "/events/2/type"]);
    expect(details["/events/0/type"]).toContain("POST /v1/auth-hook");
    expect(details["/events/1/type"]).toContain("POST /v1/analytics");
    expect(details["/events/2/type"]).toContain("Test action");
    await expectNothingAccepted();
  });

  it("answers 404 naming the unknown worlds and accepts nothing, not even the events of a known world", async () => {
    const ghost = `${world.organizationSlug}/no-such-world`;
    const res = await api.post({ events: [makeEvent(world), makeEvent(world, "visitor.registered", { world: ghost }), makeEvent(world, "visitor.registered", { world: "ghost-org/hq" })] });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ type: "/problems/unknown-world", worlds: [ghost, "ghost-org/hq"] });
    expect(res.body.detail).toContain(ghost);
    expect(res.body.detail).toContain("ghost-org/hq");
    expect(res.body.errors).toEqual([
      { pointer: "/events/1/world", detail: "names no known world" },
      { pointer: "/events/2/world", detail: "names no known world" },
    ]);
    await expectNothingAccepted();

    const single = await api.post(makeEvent(world, "visitor.registered", { world: ghost }));
    expect(single.status).toBe(404);
    expect(single.body.errors).toEqual([{ pointer: "/world", detail: "names no known world" }]);
    await expectNothingAccepted();
  });

  it("accepts the same events once they are valid (the checks above did refuse for the reason tested)", async () => {
    const res = await api.post({ events: [makeEvent(world), makeEvent(world, "consent.changed")] });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: 2, duplicates: 0, deliveries: 2 });
  });
});
