import { describe, expect, it } from "@jest/globals";
import { JOB_NAMES, JobPayloadError, assertPayload, validateDrainJob, validateEndpointDisabledMail } from "./catalogue.js";
import { drainJobId, endpointOfJobId, timerJobId } from "./drain-signals.js";
import { infraBackoffDelay } from "./producer.js";

const id = "0b9c0e55-3f43-4c1e-9a43-1c8a4a7d2f10";

describe("drain.v1 payload", () => {
  it("accepts a well-formed payload", () => {
    expect(assertPayload(JOB_NAMES.drain, validateDrainJob, { endpointId: id })).toEqual({ endpointId: id });
  });

  it("names every bad field", () => {
    expect(() => assertPayload(JOB_NAMES.drain, validateDrainJob, { endpointId: "x" })).toThrow(JobPayloadError);
    const result = validateDrainJob({ endpointId: "x", deliveryId: id });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.map((e) => e.pointer)).toEqual(expect.arrayContaining(["/endpointId", "/deliveryId"]));
  });

  it("names an endpoint's drain and timers after the endpoint, and reads it back", () => {
    expect(drainJobId(id)).toBe(`d-${id}`);
    expect(timerJobId(id, 180_000_000_000)).toBe(`t-${id}-180000000000`);
    expect(endpointOfJobId(drainJobId(id))).toBe(id);
    expect(endpointOfJobId(timerJobId(id, 180_000_000_000))).toBe(id);
    expect(endpointOfJobId(id)).toBeNull();
  });
});

describe("endpoint-disabled-mail.v1 payload", () => {
  it("refuses an unknown reason", () => {
    const result = validateEndpointDisabledMail({
      endpointId: id,
      reason: "manual",
      disabledAt: "2026-11-22T03:00:00.000Z",
      deliveryId: id,
      status: 410,
      error: null,
      consecutiveFailures: 1,
    });
    expect(result.ok).toBe(false);
  });
});

describe("infra backoff", () => {
  it("doubles from 1 s and stops at 5 minutes", () => {
    expect([1, 2, 3, 4].map(infraBackoffDelay)).toEqual([1000, 2000, 4000, 8000]);
    expect(infraBackoffDelay(30)).toBe(300_000);
  });
});
