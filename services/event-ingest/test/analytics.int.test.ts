/**
 * `POST /v1/analytics` against the real PostgreSQL and Redis: validation with pointers, and the
 * privacy rules applied before anything reaches an endpoint's buffer (spec: analytics.batch,
 * Privacy rules; categories table).
 */
import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DEFAULT_WORLD_ANALYTICS, validateAnalyticsEvent, type WorldAnalytics } from "@vw/contracts";
import { analyticsKeys } from "@vw/queues";
import { closeServer, listen, type Logger } from "@vw/service-kit";
import { PSEUDONYM_LENGTH, pseudonymKey } from "../src/analytics-privacy.js";
import { AnalyticsIntake } from "../src/analytics.service.js";
import { createIngestApp } from "../src/app.js";
import { conformance } from "./conformance.js";
import { PLAY_URL, startIngest, type IngestHarness } from "./harness.js";

const BUFFER_MAX = 50;
const ROOM = "https://play.example.test/@/acme/lobby/office.wam";
let h: IngestHarness;
let server: Server;
let baseUrl: string;
const warnings: unknown[] = [];

const logger = (() => {
  const noop = (): void => undefined;
  const l = { trace: noop, debug: noop, info: noop, warn: (f: unknown) => void warnings.push(f), error: noop, fatal: noop, child: () => l };
  return l as unknown as Logger;
})();

beforeAll(async () => {
  h = await startIngest();
  const analytics = new AnalyticsIntake(h.db, h.redis, logger, {
    keyPrefix: h.keyPrefix,
    pseudonymKey: pseudonymKey(null, "dGVzdC1vbmx5LWtleS1kby1ub3QtdXNlLWFueXdoZXJlIQ=="),
    bufferMax: BUFFER_MAX,
  });
  const app = createIngestApp({ db: h.db, redis: h.redis, queue: h.queue, logger, ingestToken: h.token, playUrl: PLAY_URL, analytics, redisKeyPrefix: h.keyPrefix });
  server = await listen(app, 0, "127.0.0.1");
  conformance.attach(server);
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  const keys = await h.redis.keys(`${h.keyPrefix}:analytics:*`);
  if (keys.length > 0) await h.redis.del(...keys);
  await closeServer(server);
  await h.close();
});

async function post(body: unknown, token: string | null = h.token) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers["authorization"] = `Bearer ${token}`;
  const res = await fetch(`${baseUrl}/v1/analytics`, { method: "POST", headers, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
}

function inner(eventName: string, options: { uuid?: string; properties?: Record<string, unknown> } = {}) {
  const at = new Date().toISOString();
  return {
    id: randomUUID(),
    type: eventName,
    timestamp: at,
    data: { eventName, source: "front", eventTime: at, user: { uuid: options.uuid ?? randomUUID() }, room: { url: ROOM }, properties: options.properties ?? {} },
  };
}

async function worldWith(analytics: Partial<Omit<WorldAnalytics, "categories">> & { categories?: Partial<WorldAnalytics["categories"]> } = {}) {
  const world = await h.createWorld();
  const settings = { ...DEFAULT_WORLD_ANALYTICS, ...analytics, categories: { ...DEFAULT_WORLD_ANALYTICS.categories, ...analytics.categories } };
  await h.prisma.world.update({ where: { id: world.id }, data: { analytics: settings } });
  const endpointId = await h.createEndpoint(world, { subscriptions: ["analytics"] });
  return { world, endpointId };
}

/** The inner events buffered for an endpoint, parsed. */
async function buffered(endpointId: string): Promise<any[]> {
  const { worldId } = await h.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: endpointId }, select: { worldId: true } });
  const texts = await h.redis.lrange(analyticsKeys(h.keyPrefix, worldId).buffer(endpointId), 0, -1);
  return texts.map((t) => JSON.parse(t));
}

describe("authentication and validation", () => {
  it("needs the ingest token", async () => {
    const { world } = await worldWith();
    expect((await post({ world: world.ref, events: [inner("area.dwell")] }, null)).status).toBe(401);
  });

  it("answers 404 for an unknown world", async () => {
    const res = await post({ world: "no-such-org/no-such-world", events: [inner("area.dwell")] });
    expect(res.status).toBe(404);
    expect(res.body.errors).toEqual([{ pointer: "/world", detail: expect.any(String) }]);
  });

  it("refuses a known event with an invalid tabulated property, with a pointer, and buffers nothing", async () => {
    const { world, endpointId } = await worldWith();
    const bad = inner("area.dwell", { properties: { durationSeconds: "long" } });
    const res = await post({ world: world.ref, events: [inner("area.dwell"), bad] });
    expect(res.status).toBe(400);
    expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain("/events/1/data/properties/durationSeconds");
    expect(await buffered(endpointId)).toEqual([]);
  });

  it("refuses a malformed request naming each member", async () => {
    const res = await post({ world: "not a ref", events: [{ id: 1 }], extra: true });
    expect(res.status).toBe(400);
    const pointers = res.body.errors.map((e: { pointer: string }) => e.pointer);
    expect(pointers).toEqual(expect.arrayContaining(["/world", "/extra", "/events/0/id"]));
  });

  it("accepts unknown event names and extra properties, unchanged", async () => {
    const { world, endpointId } = await worldWith();
    const unknown = inner("hologram.summoned", { properties: { anything: [1, 2] } });
    const extra = inner("area.dwell", { properties: { durationSeconds: 3, brandNewProperty: "x" } });
    const res = await post({ world: world.ref, events: [unknown, extra] });
    expect(res).toEqual({ status: 202, body: { accepted: 2, dropped: 0, endpoints: 1 } });
    expect(await buffered(endpointId)).toEqual([unknown, extra]);
  });
});

describe("privacy rules", () => {
  it("a world that disabled analytics: 202, everything dropped, nothing buffered", async () => {
    const { world, endpointId } = await worldWith({ enabled: false });
    const res = await post({ world: world.ref, events: [inner("area.dwell"), inner("user.connected")] });
    expect(res).toEqual({ status: 202, body: { accepted: 0, dropped: 2, endpoints: 0 } });
    expect(await buffered(endpointId)).toEqual([]);
    expect(await h.redis.sismember(analyticsKeys(h.keyPrefix, world.id).pending, endpointId)).toBe(0);
  });

  it("a category switched off drops its families, and only them", async () => {
    const { world, endpointId } = await worldWith({ categories: { collaboration: false, qualityDiagnostics: false } });
    const events = [
      inner("chat.message_sent"), // collaboration
      inner("meeting.joined"), // collaboration
      inner("media.degraded"), // quality diagnostics
      inner("websocket.error"), // quality diagnostics
      inner("user.connected"), // presence
      inner("area.dwell"), // workspace actions
    ];
    const res = await post({ world: world.ref, events });
    expect(res.body).toEqual({ accepted: 2, dropped: 4, endpoints: 1 });
    expect((await buffered(endpointId)).map((e) => e.data.eventName)).toEqual(["user.connected", "area.dwell"]);
  });

  it("presence and workspace switches drop theirs (unknown names count as workspace actions)", async () => {
    const { world, endpointId } = await worldWith({ categories: { presenceAndSessions: false, workspaceActions: false } });
    const res = await post({ world: world.ref, events: [inner("user.connected"), inner("session.started"), inner("hologram.summoned"), inner("bubble.joined")] });
    expect(res.body).toEqual({ accepted: 1, dropped: 3, endpoints: 1 });
    expect((await buffered(endpointId)).map((e) => e.data.eventName)).toEqual(["bubble.joined"]);
  });

  it("an opted-out world gets a stable per-world pseudonym, never the member id, and loses fileName", async () => {
    const member = randomUUID();
    const a = await worldWith({ userLevelActivity: false });
    const b = await worldWith({ userLevelActivity: false });
    const closed = () => inner("cowebsite.closed", { uuid: member, properties: { fileName: "salaries-2026.xlsx", mediaKind: "spreadsheet" } });
    await post({ world: a.world.ref, events: [closed(), closed()] });
    await post({ world: a.world.ref, events: [closed()] });
    await post({ world: b.world.ref, events: [closed()] });

    const inA = await buffered(a.endpointId);
    const inB = await buffered(b.endpointId);
    expect(inA).toHaveLength(3);
    const pseudonyms = new Set(inA.map((e) => e.data.user.uuid));
    expect(pseudonyms.size).toBe(1);
    const [pseudonym] = [...pseudonyms] as string[];
    expect(pseudonym).toHaveLength(PSEUDONYM_LENGTH);
    expect(pseudonym).not.toBe(member);
    expect(inB[0].data.user.uuid).not.toBe(pseudonym);
    expect(inB[0].data.user.uuid).not.toBe(member);
    for (const event of [...inA, ...inB]) {
      expect(event.data.properties).not.toHaveProperty("fileName");
      expect(event.data.properties.mediaKind).toBe("spreadsheet");
      expect(JSON.stringify(event)).not.toContain(member);
      expect(validateAnalyticsEvent(event).ok).toBe(true);
    }
  });

  it("a world with user-level activity keeps member ids and properties", async () => {
    const member = randomUUID();
    const { world, endpointId } = await worldWith();
    await post({ world: world.ref, events: [inner("cowebsite.closed", { uuid: member, properties: { fileName: "plan.pdf" } })] });
    const [event] = await buffered(endpointId);
    expect(event.data.user.uuid).toBe(member);
    expect(event.data.properties.fileName).toBe("plan.pdf");
  });
});

describe("buffering", () => {
  it("goes to every enabled analytics endpoint of the world only, bounded, counting what is trimmed", async () => {
    const { world, endpointId } = await worldWith();
    const disabled = await h.createEndpoint(world, { subscriptions: ["analytics"], enabled: false });
    const other = await h.createEndpoint(world, { subscriptions: ["visitor"] });
    const keys = analyticsKeys(h.keyPrefix, world.id);
    const events = Array.from({ length: 80 }, (_, n) => inner("area.dwell", { properties: { durationSeconds: n } }));
    expect((await post({ world: world.ref, events })).body).toEqual({ accepted: 80, dropped: 0, endpoints: 1 });

    const kept = await buffered(endpointId);
    expect(kept).toHaveLength(BUFFER_MAX);
    expect(kept.map((e) => e.data.properties.durationSeconds)).toEqual(Array.from({ length: BUFFER_MAX }, (_, i) => 80 - BUFFER_MAX + i));
    expect(await h.redis.get(keys.dropped(endpointId))).toBe(String(80 - BUFFER_MAX));
    expect(await h.redis.sismember(keys.pending, endpointId)).toBe(1);
    expect(warnings).toContainEqual(expect.objectContaining({ endpointId, trimmed: 80 - BUFFER_MAX }));
    for (const id of [disabled, other]) {
      expect(await h.redis.exists(keys.buffer(id))).toBe(0);
      expect(await h.redis.sismember(keys.pending, id)).toBe(0);
    }
    // Analytics events are not stored as rows: nothing in the delivery tables, no jobs.
    expect(await h.prisma.webhookDelivery.count({ where: { worldId: world.id } })).toBe(0);
  });
});
