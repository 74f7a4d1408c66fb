import { describe, expect, it } from "@jest/globals";
import { EVENT_TYPES, type FieldError } from "@vw/contracts";
import { parseIntakeRequest, type IntakeRequest } from "./events.schema.js";

const visitor = { uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b", name: "Grace Hopper", email: "grace@example.org", via: "sso" };
const consent = { uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b", email: "grace@example.org", type: "visitor", purpose: "newsletter", granted: null };
const event = (overrides: Record<string, unknown> = {}) => ({
  id: "evt-1",
  world: "acme/hq",
  type: "visitor.registered",
  timestamp: "2026-11-22T10:00:00+01:00",
  data: visitor,
  ...overrides,
});

function accepted(body: unknown, max = 500): IntakeRequest {
  const result = parseIntakeRequest(body, max);
  if (!result.ok) throw new Error(`refused: ${JSON.stringify(result.errors)}`);
  return result.value;
}

function refused(body: unknown, max = 500): FieldError[] {
  const result = parseIntakeRequest(body, max);
  if (result.ok) throw new Error("accepted");
  return result.errors;
}

const pointers = (errors: FieldError[]) => errors.map((e) => e.pointer).sort();
const detailAt = (errors: FieldError[], pointer: string) => errors.find((e) => e.pointer === pointer)?.detail;

describe("parseIntakeRequest", () => {
  it("accepts one event, splitting the world reference and normalising the timestamp to UTC milliseconds", () => {
    expect(accepted(event())).toEqual({
      form: "single",
      events: [
        {
          id: "evt-1",
          world: "acme/hq",
          organizationSlug: "acme",
          worldSlug: "hq",
          type: "visitor.registered",
          timestamp: "2026-11-22T09:00:00.000Z",
          data: visitor,
        },
      ],
    });
  });

  it("accepts a batch in request order, each type against its own data schema", () => {
    const request = accepted({ events: [event(), event({ id: "evt-2", type: "consent.changed", data: consent })] });
    expect(request.form).toBe("batch");
    expect(request.events.map((e) => [e.id, e.type])).toEqual([
      ["evt-1", "visitor.registered"],
      ["evt-2", "consent.changed"],
    ]);
  });

  it("lists every bad member of a single event, data pointers under /data", () => {
    const errors = refused({
      id: "",
      world: "Acme/hq",
      type: "visitor.registered",
      timestamp: "yesterday",
      data: { uuid: "u", name: "n", email: "not-an-email", via: "fax", extra: 1 },
      more: true,
    });
    expect(pointers(errors)).toEqual(["/data/email", "/data/extra", "/data/via", "/id", "/more", "/timestamp", "/world"]);
  });

  it("tells a timestamp without an offset that an offset or Z is needed", () => {
    const errors = refused(event({ timestamp: "2026-11-22T10:00:00" }));
    expect(errors).toEqual([{ pointer: "/timestamp", detail: expect.stringContaining("with a time-zone offset or Z") }]);
  });

  it("lists every bad member of every event of a batch, with the event's index", () => {
    const errors = refused({
      events: [
        event(),
        event({ id: "x".repeat(201) }),
        { world: "acme/hq", type: "consent.changed", timestamp: "2026-11-22T10:00:00Z", data: { ...consent, purpose: "spam" } },
        event({ data: { ...visitor, email: 42 } }),
        "not an event",
      ],
    });
    expect(pointers(errors)).toEqual(["/events/1/id", "/events/2/data/purpose", "/events/2/id", "/events/3/data/email", "/events/4"]);
    expect(detailAt(errors, "/events/2/id")).toBe("is required");
  });

  it("refuses unknown and delivered-only types on /type, naming the accepted types and the right route", () => {
    for (const type of ["user.connected", "member.connecting", "analytics.batch", "ping"]) {
      const errors = refused(event({ type, data: {} }));
      expect(pointers(errors)).toEqual(["/type"]);
      for (const accepted of EVENT_TYPES) expect(detailAt(errors, "/type")).toContain(accepted);
    }
    expect(detailAt(refused(event({ type: "member.connecting" })), "/type")).toContain("POST /v1/auth-hook");
    expect(detailAt(refused(event({ type: "analytics.batch" })), "/type")).toContain("POST /v1/analytics");
    expect(detailAt(refused(event({ type: "ping" })), "/type")).toContain("Test action");
    expect(detailAt(refused(event({ type: "user.connected" })), "/type")).toContain("not a known event type");
  });

  it("requires a world of two slugs", () => {
    for (const world of ["acme", "acme/hq/x", "/hq", "acme/", "acme/-hq", "ac me/hq", "ACME/hq"]) {
      expect(pointers(refused(event({ world })))).toEqual(["/world"]);
    }
    expect(accepted(event({ world: "a-1/b2" })).events[0]).toMatchObject({ organizationSlug: "a-1", worldSlug: "b2" });
  });

  it("requires an RFC 3339 date-time with an offset, a Date can hold, within 1970..9999", () => {
    for (const timestamp of ["2026-11-22T10:00:00", "2026-02-30T10:00:00Z", "2026-11-22", "1795341600", "2026-11-22T23:59:60Z", "1969-12-31T23:59:59Z"]) {
      expect(pointers(refused(event({ timestamp })))).toEqual(["/timestamp"]);
    }
    expect(pointers(refused(event({ timestamp: 1795341600 })))).toEqual(["/timestamp"]);
    expect(accepted(event({ timestamp: "2026-11-22T10:00:00.123456Z" })).events[0]?.timestamp).toBe("2026-11-22T10:00:00.123Z");
  });

  it("requires data to be an object, and checks it only against a known type", () => {
    expect(pointers(refused(event({ data: [] })))).toEqual(["/data"]);
    expect(pointers(refused(event({ data: null })))).toEqual(["/data"]);
    expect(pointers(refused(event({ type: "nope", data: { anything: 1 } })))).toEqual(["/type"]);
  });

  it("bounds the batch and refuses other members beside events", () => {
    expect(refused({ events: [] })).toEqual([{ pointer: "/events", detail: "must have at least 1 event" }]);
    expect(refused({ events: [event(), event()] }, 1)).toEqual([{ pointer: "/events", detail: "must have at most 1 events, got 2" }]);
    expect(refused({ events: {} })).toEqual([{ pointer: "/events", detail: "must be an array of events" }]);
    expect(pointers(refused({ events: [event()], world: "acme/hq" }))).toEqual(["/world"]);
  });

  it("refuses a body that is not an object", () => {
    for (const body of [null, [], "event", 3]) expect(pointers(refused(body))).toEqual([""]);
  });

  it("escapes member names in pointers", () => {
    expect(pointers(refused(event({ "a/b~c": 1 })))).toEqual(["/a~1b~0c"]);
  });
});
