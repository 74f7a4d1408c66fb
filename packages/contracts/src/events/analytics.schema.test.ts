import { describe, expect, it } from "@jest/globals";
import { LISTED_ANALYTICS_EVENT_NAMES } from "./analytics-names.js";
import { DATE_TIME_DETAIL } from "../validation.js";
import { ANALYTICS_EVENT_SCHEMA, ANALYTICS_PROPERTIES_SCHEMAS } from "./analytics.schema.js";
import { validateAnalyticsEvent } from "./validators.js";

function event(eventName: string, properties: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    id: "0e9b6a4c-71d2-4f38-9c5e-8a2b1d7f6e03",
    type: eventName,
    timestamp: "2026-11-12T15:02:10Z",
    data: {
      eventName,
      source: "pusher",
      eventTime: "2026-11-12T15:02:10Z",
      user: { uuid: "5f0c7d2e-3b9a-4c61-8e47-2d1f9a6b0c35" },
      room: { url: "https://play.vw.dev/@/acme/acme-hq/floors/ground.wam" },
      properties,
      ...extra,
    },
  };
}

function errorsOf(value: unknown) {
  const result = validateAnalyticsEvent(value);
  if (result.ok) throw new Error(`expected ${JSON.stringify(value)} to be refused`);
  return result.errors;
}

describe("ANALYTICS_EVENT_SCHEMA", () => {
  it("has one if/then branch per listed name, one for the media switch pattern and one for unknown names", () => {
    expect(ANALYTICS_EVENT_SCHEMA.properties.data.allOf).toHaveLength(LISTED_ANALYTICS_EVENT_NAMES.length + 2);
    const keyed = ANALYTICS_EVENT_SCHEMA.properties.data.allOf.slice(0, -2).map((b) => (b.if.properties.eventName as { const: string }).const);
    expect(keyed).toEqual([...LISTED_ANALYTICS_EVENT_NAMES]);
  });

  it("never requires a property nor closes a properties object", () => {
    for (const schema of Object.values(ANALYTICS_PROPERTIES_SCHEMAS)) {
      expect(schema).not.toHaveProperty("required");
      expect(schema).not.toHaveProperty("additionalProperties");
    }
  });
});

describe("validateAnalyticsEvent", () => {
  it("accepts an unknown event name with any properties", () => {
    const e = event("hologram.projected", { intensity: "high", durationSeconds: "forever" });
    expect(validateAnalyticsEvent(e)).toEqual({ ok: true, value: e });
  });

  it("accepts a known name with extra properties and extra members everywhere", () => {
    const e = {
      ...event("area.dwell", { areaId: "a1", durationSeconds: 12.5, colour: "blue" }, { sessionId: "s-1" }),
      schemaRevision: 3,
    };
    expect(validateAnalyticsEvent(e).ok).toBe(true);
  });

  it("accepts a known name with no properties at all (every property is optional)", () => {
    expect(validateAnalyticsEvent(event("cowebsite.closed", {})).ok).toBe(true);
    expect(validateAnalyticsEvent(event("room.visited", {})).ok).toBe(true);
  });

  it("accepts any properties for a listed name with no tabulated properties", () => {
    expect(validateAnalyticsEvent(event("meeting.started", { durationSeconds: -1, areaId: 7 })).ok).toBe(true);
  });

  it("refuses area.dwell with a negative durationSeconds", () => {
    expect(errorsOf(event("area.dwell", { durationSeconds: -1 }))).toEqual([
      { pointer: "/data/properties/durationSeconds", detail: "must be >= 0" },
    ]);
  });

  it("refuses area.dwell with a string durationSeconds", () => {
    expect(errorsOf(event("area.dwell", { durationSeconds: "390" }))).toEqual([
      { pointer: "/data/properties/durationSeconds", detail: "must be number" },
    ]);
  });

  it("refuses an endReason outside the listed values", () => {
    expect(errorsOf(event("cowebsite.closed", { endReason: "tab_closed" }))[0]?.pointer).toBe("/data/properties/endReason");
  });

  it.each([
    ["asset.error", { kind: "font" }, "/data/properties/kind"],
    ["auth.user_identified", { roomId: 42 }, "/data/properties/roomId"],
    ["chat.message_sent", { chatContext: "world" }, "/data/properties/chatContext"],
    ["cowebsite.closed", { mediaKind: "gif" }, "/data/properties/mediaKind"],
    ["cowebsite.closed", { triggerProperty: "click" }, "/data/properties/triggerProperty"],
    ["cowebsite.closed", { fileName: 3 }, "/data/properties/fileName"],
    ["cowebsite.closed", { schemaVersion: "1" }, "/data/properties/schemaVersion"],
    ["cowebsite.closed", { startedAt: "yesterday" }, "/data/properties/startedAt"],
    ["cowebsite.opened", { targetUrl: false }, "/data/properties/targetUrl"],
    ["user.disconnected", { durationSeconds: 1.5 }, "/data/properties/durationSeconds"],
    ["user.disconnected", { connectedAt: "12:00" }, "/data/properties/connectedAt"],
  ])("refuses %s with %j", (name, properties, pointer) => {
    expect(errorsOf(event(name, properties)).map((e) => e.pointer)).toEqual([pointer]);
  });

  it("accepts null where the spec allows it", () => {
    expect(validateAnalyticsEvent(event("auth.user_identified", { roomId: null })).ok).toBe(true);
    expect(validateAnalyticsEvent(event("cowebsite.closed", { fileName: null, fileExtension: null })).ok).toBe(true);
  });

  it("accepts the media switch names with open properties", () => {
    expect(validateAnalyticsEvent(event("media.livekit_switch.requested", { to: "livekit" })).ok).toBe(true);
  });

  it("lists every bad member of the event itself", () => {
    const bad = { id: 1, type: "area.dwell", timestamp: "now", data: { eventName: "area.dwell", source: "phone", user: {}, room: { url: 3 }, properties: [] } };
    expect(errorsOf(bad)).toEqual(
      expect.arrayContaining([
        { pointer: "/id", detail: "must be string" },
        { pointer: "/timestamp", detail: DATE_TIME_DETAIL },
        { pointer: "/data/eventTime", detail: "is required" },
        { pointer: "/data/source", detail: "must be one of: front, pusher, media" },
        { pointer: "/data/user/uuid", detail: "is required" },
        { pointer: "/data/room/url", detail: "must be string" },
        { pointer: "/data/properties", detail: "must be object" },
      ]),
    );
  });
});
