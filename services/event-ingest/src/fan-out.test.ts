/**
 * The fan-out as the pure function it is: which endpoints each event goes to (the subscription of
 * its type, matched once per event and endpoint), and the bytes each delivery carries (the event's
 * envelope serialised once, each delivery adding its own deliveryId and its endpoint's apiVersion).
 */
import { describe, expect, it } from "@jest/globals";
import { uuidV7Time, type IntakeWorld } from "@vw/db";
import { buildEnvelope } from "@vw/webhook-core";
import { endpointsFor, fanOut, type FanOutEvent } from "./fan-out.js";

const PLAY_URL = "https://play.example.test";
const CREATED_AT = new Date("2026-11-22T10:00:00.123Z");

const endpoint = (id: string, subscriptions: string[], apiVersion = "2026-11-01") => ({ id, apiVersion, subscriptions });

const world = (endpoints: IntakeWorld["endpoints"], customDomain: string | null = null): IntakeWorld => ({
  id: "00000000-0000-4000-8000-00000000a001",
  organizationSlug: "acme",
  worldSlug: "hq",
  customDomain,
  endpoints,
});

/** Event data that counts how many times it is serialised (JSON.stringify calls toJSON). */
function countingData(payload: Record<string, unknown>) {
  const counter = { serialised: 0 };
  const data = {
    toJSON() {
      counter.serialised += 1;
      return payload;
    },
  };
  return { data, counter };
}

let seq = 0;
function event(w: IntakeWorld, type: string, data: unknown = { n: 1 }, extra: Partial<FanOutEvent> = {}): FanOutEvent {
  seq += 1;
  return { rowId: `00000000-0000-4000-8000-${String(seq).padStart(12, "0")}`, producerId: `evt-${seq}`, type, timestamp: "2026-11-22T09:15:30.250Z", data, world: w, ...extra };
}

const ALL = ["recording", "visitor", "consent", "analytics", "auth"];

describe("endpointsFor", () => {
  it.each([
    ["recording.completed", ["recording"], true],
    ["recording.completed", ["visitor", "consent"], false],
    ["visitor.registered", ["visitor"], true],
    ["visitor.registered", ["consent", "visitor"], true],
    ["consent.changed", ["visitor"], false],
    ["consent.changed", ["consent"], true],
    ["analytics.batch", ["analytics"], true],
    ["member.connecting", ["auth"], true],
    ["member.connecting", ["visitor", "recording", "consent", "analytics"], false],
    // The Test action's type has no subscription: no endpoint gets it by fan-out.
    ["ping", ALL, false],
    ["no.such.type", ALL, false],
    ["visitor.registered", [], false],
  ])("%s to an endpoint subscribed to %j: %s", (type, subscriptions, matches) => {
    const w = world([endpoint("e1", subscriptions)]);
    expect(endpointsFor(w, type).map((e) => e.id)).toEqual(matches ? ["e1"] : []);
  });

  it("keeps the world's endpoint order and leaves the others out", () => {
    const w = world([endpoint("a", ["visitor"]), endpoint("b", ["consent"]), endpoint("c", ALL), endpoint("d", ["visitor", "consent"])]);
    expect(endpointsFor(w, "visitor.registered").map((e) => e.id)).toEqual(["a", "c", "d"]);
    expect(endpointsFor(w, "consent.changed").map((e) => e.id)).toEqual(["b", "c", "d"]);
    expect(endpointsFor(w, "recording.completed").map((e) => e.id)).toEqual(["c"]);
  });
});

describe("fanOut", () => {
  const w = world([
    endpoint("ep-visitor", ["visitor"]),
    endpoint("ep-visitor-consent-old", ["visitor", "consent"], "2025-06-30"),
    endpoint("ep-all", ALL),
    endpoint("ep-recording", ["recording"], "2025-06-30"),
  ]);

  it.each([
    ["visitor.registered", ["ep-visitor", "ep-visitor-consent-old", "ep-all"]],
    ["consent.changed", ["ep-visitor-consent-old", "ep-all"]],
    ["recording.completed", ["ep-all", "ep-recording"]],
    ["ping", []],
  ])("gives a %s event one delivery per subscribed endpoint, each once: %j", (type, endpoints) => {
    const rows = fanOut([event(w, type)], CREATED_AT, PLAY_URL);
    expect(rows.map((r) => r.endpointId)).toEqual(endpoints);
  });

  it("fans a batch out event by event, each to its own world's endpoints", () => {
    const other = { ...world([endpoint("other-visitor", ["visitor"])]), id: "00000000-0000-4000-8000-00000000a002", worldSlug: "annex" };
    const events = [event(w, "visitor.registered"), event(other, "visitor.registered"), event(w, "consent.changed"), event(other, "consent.changed")];
    const rows = fanOut(events, CREATED_AT, PLAY_URL);
    expect(rows.map((r) => [r.event?.producerId, r.worldId, r.endpointId])).toEqual([
      [events[0]!.producerId, w.id, "ep-visitor"],
      [events[0]!.producerId, w.id, "ep-visitor-consent-old"],
      [events[0]!.producerId, w.id, "ep-all"],
      [events[1]!.producerId, other.id, "other-visitor"],
      [events[2]!.producerId, w.id, "ep-visitor-consent-old"],
      [events[2]!.producerId, w.id, "ep-all"],
    ]);
    for (const [i, row] of rows.entries()) {
      const source = events.find((e) => e.producerId === row.event?.producerId)!;
      expect(row).toMatchObject({ type: source.type, event: { rowId: source.rowId, producerId: source.producerId } });
      expect(row.test).toBeUndefined();
      expect(rows.findIndex((r) => r.id === row.id)).toBe(i);
    }
  });

  it("serialises each event's data once, whatever the number of endpoints and api versions", () => {
    const a = countingData({ uuid: "u-1", name: "Grace" });
    const b = countingData({ uuid: "u-2", name: "Ada" });
    const c = countingData({ uuid: "u-3" });
    const rows = fanOut([event(w, "visitor.registered", a.data), event(w, "consent.changed", b.data), event(w, "ping", c.data)], CREATED_AT, PLAY_URL);
    expect(rows).toHaveLength(5);
    expect([a.counter.serialised, b.counter.serialised]).toEqual([1, 1]);
    // An event no endpoint gets is not serialised at all.
    expect(c.counter.serialised).toBe(0);
  });

  it("gives each delivery the exact bytes of its envelope: its own deliveryId, its endpoint's apiVersion, the event's type, time, world and data", () => {
    const data = { uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b", name: "Grace Hopper", email: "grace@example.org", via: "sso" };
    const ev = event(w, "visitor.registered", data);
    const rows = fanOut([ev], CREATED_AT, `${PLAY_URL}/`);
    const apiVersions: Record<string, string> = { "ep-visitor": "2026-11-01", "ep-visitor-consent-old": "2025-06-30", "ep-all": "2026-11-01" };
    for (const row of rows) {
      const expected = buildEnvelope({
        deliveryId: row.id,
        apiVersion: apiVersions[row.endpointId]!,
        type: "visitor.registered",
        timestamp: ev.timestamp,
        world: { slug: "hq", url: `${PLAY_URL}/@/acme/hq` },
        data,
      });
      expect(row.body.equals(expected)).toBe(true);
    }
    // Two endpoints of one api version: bodies that differ only by their deliveryId.
    const [first, , third] = rows;
    expect(first!.body.toString("utf8").replace(first!.id, "X")).toBe(third!.body.toString("utf8").replace(third!.id, "X"));
  });

  it("names a world with a custom domain by its domain", () => {
    const custom = world([endpoint("e", ["consent"])], "worlds.example.test");
    const [row] = fanOut([event(custom, "consent.changed", { choice: "granted" })], CREATED_AT, PLAY_URL);
    expect(JSON.parse(row!.body.toString("utf8")).world).toEqual({ slug: "hq", url: "https://worlds.example.test/" });
  });

  it("makes every deliveryId a distinct UUIDv7 of the intake's time (the event's partition)", () => {
    const rows = fanOut(
      Array.from({ length: 50 }, () => event(w, "visitor.registered")),
      CREATED_AT,
      PLAY_URL,
    );
    expect(rows).toHaveLength(150);
    expect(new Set(rows.map((r) => r.id)).size).toBe(150);
    for (const row of rows) expect(uuidV7Time(row.id)).toEqual(CREATED_AT);
  });

  it("carries the intake's trace context when there is one, and none otherwise", () => {
    const traced = event(w, "consent.changed", {}, { trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
    const rows = fanOut([traced, event(w, "consent.changed")], CREATED_AT, PLAY_URL);
    expect(rows.map((r) => r.trace)).toEqual([traced.trace, traced.trace, undefined, undefined]);
    expect("trace" in rows[2]!).toBe(false);
  });

  it("gives nothing for no events, or a world without endpoints", () => {
    expect(fanOut([], CREATED_AT, PLAY_URL)).toEqual([]);
    expect(fanOut([event(world([]), "visitor.registered")], CREATED_AT, PLAY_URL)).toEqual([]);
  });
});
