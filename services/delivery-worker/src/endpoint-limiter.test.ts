import { describe, expect, it } from "@jest/globals";
import { EndpointLimiter } from "./endpoint-limiter.js";

describe("EndpointLimiter", () => {
  it("opens a new endpoint's window at 2 and widens it by one per answer up to the limit", () => {
    const limiter = new EndpointLimiter({ limit: 4, timeoutMs: 1000 });
    expect([limiter.tryAcquire("a"), limiter.tryAcquire("a"), limiter.tryAcquire("a")]).toEqual([true, true, false]);
    expect(limiter.tryAcquire("b")).toBe(true);
    limiter.release("a", "answered");
    expect(limiter.limitOf("a")).toBe(3);
    for (let i = 0; i < 5; i += 1) {
      limiter.tryAcquire("a");
      limiter.release("a", "answered");
    }
    expect(limiter.limitOf("a")).toBe(4);
    expect([1, 2, 3, 4, 5].map(() => limiter.tryAcquire("a"))).toEqual([true, true, true, false, false]);
  });

  it("falls back to the slow window on a timeout or connection error", () => {
    const limiter = new EndpointLimiter({ limit: 8, initialLimit: 8, slowLimit: 1, timeoutMs: 1000 });
    limiter.tryAcquire("a");
    limiter.release("a", "unresponsive");
    expect([limiter.tryAcquire("a"), limiter.tryAcquire("a")]).toEqual([true, false]);
    limiter.release("a", "answered");
    expect(limiter.limitOf("a")).toBe(2);
  });

  it("defers by about the age of the oldest attempt in flight, doubling per deferral, capped, with jitter", () => {
    let clock = 0;
    const limiter = new EndpointLimiter({ limit: 1, initialLimit: 1, timeoutMs: 10_000, random: () => 0, now: () => clock });
    expect(limiter.deferDelay("a", 0)).toBe(100);
    limiter.tryAcquire("a");
    clock = 1500;
    expect(limiter.deferDelay("a", 0)).toBe(1500);
    expect(limiter.deferDelay("a", 2)).toBe(6000);
    clock = 9000;
    expect(limiter.deferDelay("a", 0)).toBe(5000);
    expect(limiter.deferDelay("a", 10)).toBe(60_000);
    limiter.release("a", "unresponsive");
    expect(limiter.deferDelay("a", 0)).toBe(5000);
    const jittered = new EndpointLimiter({ limit: 1, timeoutMs: 10_000, random: () => 0.5 });
    expect(jittered.deferDelay("b", 0)).toBe(150);
  });
});
