import { describe, expect, it } from "@jest/globals";
import { CURRENT_API_VERSION, WEBHOOK_SUBSCRIPTIONS } from "../endpoints.schema.js";
import { DELIVERED_EVENT_TYPES, SUBSCRIPTION_OF_TYPE, type DeliveredEventType } from "./event-types.js";
import { EVENT_SAMPLES, LEGACY_AUTH_SAMPLE, sampleDelivery, sampleFor } from "./samples.js";
import { validateDelivered, validateLegacyAuthBody } from "./validators.js";

const DAY_MS = 24 * 60 * 60 * 1000;

describe("EVENT_SAMPLES", () => {
  it("has one sample per delivered type", () => {
    expect(Object.keys(EVENT_SAMPLES).sort()).toEqual([...DELIVERED_EVENT_TYPES].sort());
  });

  it.each(DELIVERED_EVENT_TYPES.map((t) => [t]))("%s: sampleDelivery passes validateDelivered", (type: DeliveredEventType) => {
    const delivery = sampleDelivery(type);
    expect(validateDelivered(type, delivery)).toEqual({ ok: true, value: delivery });
    expect(delivery.apiVersion).toBe(CURRENT_API_VERSION);
    expect(delivery.test).toBe(type === "ping" ? true : undefined);
  });

  it("gives recording.completed an https download link and an expiry about three months after the recording", () => {
    const r = EVENT_SAMPLES["recording.completed"];
    expect(new URL(r.downloadUrl).protocol).toBe("https:");
    const days = (Date.parse(r.expiresAt) - Date.parse(r.endedAt)) / DAY_MS;
    expect(days).toBeGreaterThanOrEqual(89);
    expect(days).toBeLessThanOrEqual(92);
    expect((Date.parse(r.endedAt) - Date.parse(r.startedAt)) / 1000).toBe(r.durationSeconds);
  });

  it("puts area.dwell and cowebsite.closed among several analytics events, each with type equal to its eventName", () => {
    const events = EVENT_SAMPLES["analytics.batch"].events;
    expect(events.length).toBeGreaterThanOrEqual(3);
    expect(events.map((e) => e.data.eventName)).toEqual(expect.arrayContaining(["area.dwell", "cowebsite.closed"]));
    for (const e of events) expect(e.type).toBe(e.data.eventName);
  });

  it("is frozen, so no caller can change what the next one sends", () => {
    expect(() => {
      (EVENT_SAMPLES["visitor.registered"] as { name: string }).name = "Mallory";
    }).toThrow(TypeError);
  });

  it("has a legacy auth sample matching the member.connecting one", () => {
    expect(validateLegacyAuthBody(LEGACY_AUTH_SAMPLE).ok).toBe(true);
    expect(LEGACY_AUTH_SAMPLE.accessToken).toBe(EVENT_SAMPLES["member.connecting"].accessTokens[0]?.token);
  });
});

describe("sampleFor", () => {
  it.each([
    ["recording", "recording.completed"],
    ["visitor", "visitor.registered"],
    ["consent", "consent.changed"],
    ["auth", "member.connecting"],
    ["analytics", "analytics.batch"],
  ] as const)("%s -> %s", (subscription, type) => {
    const sample = sampleFor(subscription);
    expect(sample.type).toBe(type);
    expect(sample.data).toEqual(EVENT_SAMPLES[type]);
    expect(SUBSCRIPTION_OF_TYPE[sample.type]).toBe(subscription);
  });

  it("covers every subscription and hands out a copy the caller may change", () => {
    for (const s of WEBHOOK_SUBSCRIPTIONS) expect(sampleFor(s).type).toBeDefined();
    const sample = sampleFor("visitor");
    sample.data.name = "Changed";
    expect(EVENT_SAMPLES["visitor.registered"].name).not.toBe("Changed");
  });
});
