import { describe, expect, it } from "@jest/globals";
import { percentile } from "./delivery-history.js";
import { failureCounterChanges } from "./delivery-log.js";
import type { AttemptApplication } from "./log-types.js";
import { uuidV7, uuidV7Time } from "./uuid-v7.js";

describe("uuidV7", () => {
  it("carries its millisecond time, sorts in creation order within one millisecond, and is a valid v7 UUID", () => {
    const at = Date.parse("2026-11-23T12:34:56.789Z");
    const ids = Array.from({ length: 50 }, () => uuidV7(at));
    for (const id of ids) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(uuidV7Time(id)!.toISOString()).toBe("2026-11-23T12:34:56.789Z");
    }
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(50);
  });

  it("stays valid and unique across many ids and milliseconds (the random pool refills every 512 ids)", () => {
    const start = Date.parse("2026-11-23T12:00:00.000Z");
    const ids = Array.from({ length: 5000 }, (_, i) => uuidV7(start + Math.floor(i / 3)));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(5000);
    // The 62 random bits are random: no tail repeats, and every hex digit shows up in them.
    const tails = ids.map((id) => id.slice(19));
    expect(new Set(tails).size).toBe(5000);
    expect(new Set(tails.join("").replace(/-/g, "")).size).toBe(16);
    expect([...ids].sort()).toEqual(ids);
  });

  it("has no time for other ids (v4 ids of older history)", () => {
    expect(uuidV7Time("3f1c2e4a-9b7d-4c1e-8a2b-1234567890ab")).toBeNull();
    expect(uuidV7Time("not-a-uuid")).toBeNull();
  });
});

describe("percentile", () => {
  const bounds = [10, 100, 1000];
  it("interpolates inside the bucket holding the rank and never exceeds the observed maximum", () => {
    // 10 durations in [10, 100), none elsewhere, max 90: the bucket is read as [10, 90].
    expect(percentile([0, 10, 0, 0], bounds, 90, 0.5)).toBe(50);
    expect(percentile([0, 10, 0, 0], bounds, 90, 0.99)).toBe(89);
    // The overflow bucket reports up to the maximum.
    expect(percentile([1, 0, 0, 1], bounds, 5000, 0.99)).toBeLessThanOrEqual(5000);
    expect(percentile([0, 0, 0, 0], bounds, 0, 0.5)).toBe(0);
  });
});

describe("failureCounterChanges", () => {
  const change = (endpointId: string, failures: AttemptApplication["failures"]): Pick<AttemptApplication, "endpointId" | "failures"> => ({ endpointId, failures });

  it("adds failures, restarts after a success, and ignores attempts that do not count", () => {
    const changes = failureCounterChanges([
      change("a", "increment"),
      change("a", "increment"),
      change("b", "increment"),
      change("b", "reset"),
      change("b", "increment"),
      change("c", "reset"),
      change("d", "none"),
      // Attempts that do not count leave a count as it is, between others too.
      change("a", "none"),
      change("e", "increment"),
      change("e", "none"),
      change("e", "reset"),
    ]);
    expect(Object.fromEntries(changes)).toEqual({ a: { reset: false, n: 2 }, b: { reset: true, n: 1 }, c: { reset: true, n: 0 }, e: { reset: true, n: 0 } });
  });
});
