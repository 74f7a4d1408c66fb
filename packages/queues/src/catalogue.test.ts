import { describe, expect, it } from "@jest/globals";
import { JOB_NAMES, JobPayloadError, assertPayload, validateDeliverJob, validateEndpointDisabledMail, validateLegacyDeliverJob } from "./catalogue.js";
import { deliverJobId, infraBackoffDelay, runOfJobId } from "./producer.js";

const id = "0b9c0e55-3f43-4c1e-9a43-1c8a4a7d2f10";

describe("deliver.v2 payload", () => {
  it("accepts a well-formed payload", () => {
    expect(assertPayload(JOB_NAMES.deliver, validateDeliverJob, { deliveryId: id, endpointId: id, run: 0 })).toEqual({ deliveryId: id, endpointId: id, run: 0 });
  });

  it("names every bad field", () => {
    expect(() => assertPayload(JOB_NAMES.deliver, validateDeliverJob, { deliveryId: "x", run: -1 })).toThrow(JobPayloadError);
    const result = validateDeliverJob({ deliveryId: "x", run: -1, trigger: "initial" });
    expect(result.ok).toBe(false);
    if (!result.ok) {
      const pointers = result.errors.map((e) => e.pointer);
      expect(pointers).toEqual(expect.arrayContaining(["/deliveryId", "/run", "/endpointId", "/trigger"]));
    }
  });

  it("names a run's job after the delivery and the run alone, and reads the run back", () => {
    expect(deliverJobId({ deliveryId: id, run: 0 })).toBe(id);
    expect(deliverJobId({ deliveryId: id, run: 7 })).toBe(`${id}-replay-7`);
    expect(runOfJobId(id)).toBe(0);
    expect(runOfJobId(`${id}-replay-7`)).toBe(7);
    expect(runOfJobId(`${id}-replay-1732700000000`)).toBeUndefined();
  });
});

describe("deliver.v1 payload (queued by earlier versions)", () => {
  it("is still understood", () => {
    expect(validateLegacyDeliverJob({ deliveryId: id, endpointId: id, trigger: "replay", attempt: 2 }).ok).toBe(true);
    expect(validateLegacyDeliverJob({ deliveryId: id, endpointId: id, trigger: "later" }).ok).toBe(false);
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
