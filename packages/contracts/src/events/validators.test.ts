import { describe, expect, it } from "@jest/globals";
import { WEBHOOK_SUBSCRIPTIONS } from "../endpoints.schema.js";
import { DATE_TIME_DETAIL } from "../validation.js";
import type { DeliveredEventType } from "./event-types.js";
import { DELIVERED_EVENT_TYPES, EVENT_TYPES, SUBSCRIPTION_OF_TYPE, eventTypesOfSubscription, isEventType } from "./event-types.js";
import { EVENT_SAMPLES, sampleDelivery } from "./samples.js";
import {
  WEBHOOK_SCHEMAS,
  validateAnalyticsEvent,
  validateDelivered,
  validateEnvelope,
  validateEventData,
  validateLegacyAuthBody,
} from "./validators.js";

function errorsOf(result: { ok: true } | { ok: false; errors: { pointer: string; detail: string }[] }) {
  if (result.ok) throw new Error("expected the value to be refused");
  return result.errors;
}

describe("event types and subscriptions", () => {
  it("accepts the three asynchronous domain types at intake", () => {
    expect([...EVENT_TYPES]).toEqual(["recording.completed", "visitor.registered", "consent.changed"]);
    expect(isEventType("consent.changed")).toBe(true);
    expect(isEventType("member.connecting")).toBe(false);
    expect(isEventType("ping")).toBe(false);
  });

  it("maps each delivered type to its subscription, ping to none", () => {
    expect(SUBSCRIPTION_OF_TYPE).toEqual({
      "recording.completed": "recording",
      "visitor.registered": "visitor",
      "consent.changed": "consent",
      "analytics.batch": "analytics",
      "member.connecting": "auth",
      ping: null,
    });
    expect(eventTypesOfSubscription("auth")).toEqual(["member.connecting"]);
    expect(eventTypesOfSubscription("analytics")).toEqual(["analytics.batch"]);
  });

  it("gives every subscription at least one type", () => {
    for (const s of WEBHOOK_SUBSCRIPTIONS) expect(eventTypesOfSubscription(s).length).toBeGreaterThan(0);
  });

  it("gives every schema a distinct stable $id under https://schemas.vw.dev/webhooks/", () => {
    const ids = WEBHOOK_SCHEMAS.map((s) => s.$id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^https:\/\/schemas\.vw\.dev\/webhooks\/[a-z./-]+\.json$/);
    expect(ids).toContain("https://schemas.vw.dev/webhooks/recording.completed.json");
  });
});

describe("validateEventData", () => {
  it.each(DELIVERED_EVENT_TYPES.map((t) => [t]))("accepts the %s sample", (type: DeliveredEventType) => {
    expect(validateEventData(type, EVENT_SAMPLES[type])).toEqual({ ok: true, value: EVENT_SAMPLES[type] });
  });

  it("lists every bad field of recording.completed, with pointers rooted at data", () => {
    const data = {
      ...EVENT_SAMPLES["recording.completed"],
      room: {},
      recorder: { uuid: "u", name: "n", email: "not-an-email" },
      durationSeconds: 12.5,
      sizeBytes: -1,
      downloadUrl: "recording.mp4",
      expiresAt: "in three months",
      extra: true,
    } as Record<string, unknown>;
    delete data["recordingId"];
    expect(errorsOf(validateEventData("recording.completed", data))).toEqual(
      expect.arrayContaining([
        { pointer: "/recordingId", detail: "is required" },
        { pointer: "/extra", detail: "is not allowed" },
        { pointer: "/room/url", detail: "is required" },
        { pointer: "/recorder/email", detail: "must be a valid email" },
        { pointer: "/durationSeconds", detail: "must be integer" },
        { pointer: "/sizeBytes", detail: "must be >= 0" },
        { pointer: "/downloadUrl", detail: "must be a valid uri" },
        { pointer: "/expiresAt", detail: DATE_TIME_DETAIL },
      ]),
    );
    expect(errorsOf(validateEventData("recording.completed", data))).toHaveLength(8);
  });

  it("accepts a null recorder and refuses a missing one", () => {
    expect(validateEventData("recording.completed", { ...EVENT_SAMPLES["recording.completed"], recorder: null }).ok).toBe(true);
    const { recorder: _recorder, ...withoutRecorder } = EVENT_SAMPLES["recording.completed"];
    expect(errorsOf(validateEventData("recording.completed", withoutRecorder))).toEqual([{ pointer: "/recorder", detail: "is required" }]);
  });

  it("refuses visitor.registered via anything but email or sso", () => {
    expect(errorsOf(validateEventData("visitor.registered", { ...EVENT_SAMPLES["visitor.registered"], via: "invite" }))).toEqual([
      { pointer: "/via", detail: "must be one of: email, sso" },
    ]);
  });

  it("accepts consent.changed granted true, false and null, and lists each bad member", () => {
    for (const granted of [true, false, null]) {
      expect(validateEventData("consent.changed", { ...EVENT_SAMPLES["consent.changed"], granted }).ok).toBe(true);
    }
    const errors = errorsOf(validateEventData("consent.changed", { uuid: "u", email: "a@b.example", type: "admin", purpose: "marketing", granted: "yes" }));
    expect(errors.map((e) => e.pointer).sort()).toEqual(["/granted", "/purpose", "/type"]);
    expect(errors).toContainEqual({ pointer: "/granted", detail: "must be boolean or null" });
  });

  it("refuses member.connecting tokens without a provider", () => {
    const data = { ...EVENT_SAMPLES["member.connecting"], accessTokens: [{ token: "t" }] };
    expect(errorsOf(validateEventData("member.connecting", data))).toEqual([{ pointer: "/accessTokens/0/provider", detail: "is required" }]);
    expect(validateEventData("member.connecting", { ...EVENT_SAMPLES["member.connecting"], accessTokens: [] }).ok).toBe(true);
  });

  it("accepts only {} for ping", () => {
    expect(validateEventData("ping", {}).ok).toBe(true);
    expect(errorsOf(validateEventData("ping", { hello: "world" }))).toEqual([{ pointer: "/hello", detail: "is not allowed" }]);
    expect(errorsOf(validateEventData("ping", []))).toEqual([{ pointer: "", detail: "must be object" }]);
  });

  it("accepts 100 analytics events per batch and refuses 101", () => {
    const inner = EVENT_SAMPLES["analytics.batch"].events[0];
    expect(validateEventData("analytics.batch", { events: Array.from({ length: 100 }, () => inner) }).ok).toBe(true);
    expect(errorsOf(validateEventData("analytics.batch", { events: Array.from({ length: 101 }, () => inner) }))).toEqual([
      { pointer: "/events", detail: "must have at most 100 items" },
    ]);
  });

  it("checks each inner event of a batch against the analytics event schema", () => {
    const inner = EVENT_SAMPLES["analytics.batch"].events[0];
    const broken = { ...inner, data: { ...inner?.data, properties: { durationSeconds: -3 } } };
    expect(errorsOf(validateEventData("analytics.batch", { events: [inner, broken] }))).toEqual([
      { pointer: "/events/1/data/properties/durationSeconds", detail: "must be >= 0" },
    ]);
  });

  it("throws on a type it has no schema for", () => {
    expect(() => validateEventData("order.placed" as DeliveredEventType, {})).toThrow(RangeError);
  });
});

describe("validateEnvelope", () => {
  it("accepts an envelope of a type it does not know", () => {
    const body = { ...sampleDelivery("visitor.registered"), type: "invoice.paid", data: { amount: 3 } };
    expect(validateEnvelope(body).ok).toBe(true);
  });

  it("lists every bad envelope member", () => {
    const body = { deliveryId: "42", apiVersion: "2026-11", type: "", timestamp: "2026-11-12", world: { slug: "Acme HQ" }, data: [], test: false, retry: 1 };
    expect(errorsOf(validateEnvelope(body))).toEqual(
      expect.arrayContaining([
        { pointer: "/deliveryId", detail: "must be a valid uuid" },
        { pointer: "/apiVersion", detail: "must match the pattern ^\\d{4}-\\d{2}-\\d{2}$" },
        { pointer: "/type", detail: "must be at least 1 characters long" },
        { pointer: "/timestamp", detail: DATE_TIME_DETAIL },
        { pointer: "/world/url", detail: "is required" },
        { pointer: "/world/slug", detail: expect.stringContaining("pattern") },
        { pointer: "/data", detail: "must be object" },
        { pointer: "/test", detail: "must be true" },
        { pointer: "/retry", detail: "is not allowed" },
      ]),
    );
  });
});

describe("validateDelivered", () => {
  it.each(DELIVERED_EVENT_TYPES.map((t) => [t]))("accepts the sample %s wrapped in an envelope", (type: DeliveredEventType) => {
    const body = { deliveryId: "8f14e45f-ceea-467f-a8f0-2b7c1d9e3a6b", apiVersion: "2026-11-01", type, timestamp: "2026-11-12T15:09:00Z", world: { slug: "acme-hq", url: "https://play.vw.dev/@/acme/acme-hq" }, data: EVENT_SAMPLES[type] };
    expect(validateDelivered(type, body)).toEqual({ ok: true, value: body });
    expect(validateDelivered(type, { ...body, test: true }).ok).toBe(true);
  });

  it("refuses a body whose type is another one", () => {
    const body = { ...sampleDelivery("visitor.registered"), type: "consent.changed" };
    expect(errorsOf(validateDelivered("visitor.registered", body))).toEqual([{ pointer: "/type", detail: 'must be "visitor.registered"' }]);
  });

  it("checks data against the type's schema, with pointers under /data", () => {
    const body = { ...sampleDelivery("ping"), data: { surprise: 1 } };
    expect(errorsOf(validateDelivered("ping", body))).toEqual([{ pointer: "/data/surprise", detail: "is not allowed" }]);
  });

  it("still applies the envelope rules", () => {
    const body = { ...sampleDelivery("recording.completed"), deliveryId: "not-a-uuid" };
    expect(errorsOf(validateDelivered("recording.completed", body))).toEqual([{ pointer: "/deliveryId", detail: "must be a valid uuid" }]);
  });
});

describe("validateLegacyAuthBody", () => {
  it("accepts a token or null, with action auth", () => {
    const body = { roomUrl: "https://play.vw.dev/@/acme/acme-hq/floors/ground.wam", uuid: "u-1", accessToken: null, action: "auth" };
    expect(validateLegacyAuthBody(body).ok).toBe(true);
    expect(validateLegacyAuthBody({ ...body, accessToken: "tok" }).ok).toBe(true);
  });

  it("refuses an enveloped body and lists every problem", () => {
    expect(errorsOf(validateLegacyAuthBody({ ...sampleDelivery("member.connecting") })).map((e) => e.pointer).sort()).toEqual(
      ["/accessToken", "/action", "/apiVersion", "/data", "/deliveryId", "/roomUrl", "/timestamp", "/type", "/uuid", "/world"].sort(),
    );
    expect(errorsOf(validateLegacyAuthBody({ roomUrl: "x", uuid: "u", accessToken: 1, action: "login" }))).toEqual(
      expect.arrayContaining([
        { pointer: "/roomUrl", detail: "must be a valid uri" },
        { pointer: "/accessToken", detail: "must be string or null" },
        { pointer: "/action", detail: 'must be "auth"' },
      ]),
    );
  });
});

describe("validateAnalyticsEvent", () => {
  it("accepts every inner event of the batch sample", () => {
    for (const e of EVENT_SAMPLES["analytics.batch"].events) expect(validateAnalyticsEvent(e).ok).toBe(true);
  });
});
