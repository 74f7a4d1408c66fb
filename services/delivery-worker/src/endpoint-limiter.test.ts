import { describe, expect, it } from "@jest/globals";
import { EndpointLimiter } from "./endpoint-limiter.js";
import { failureCounterChanges, type AttemptResult } from "./delivery-store.js";

describe("EndpointLimiter", () => {
  it("caps deliveries in flight per endpoint, independently of other endpoints", () => {
    const limiter = new EndpointLimiter({ limit: 2, timeoutMs: 1000 });
    expect([limiter.tryAcquire("a"), limiter.tryAcquire("a"), limiter.tryAcquire("a")]).toEqual([true, true, false]);
    expect(limiter.tryAcquire("b")).toBe(true);
    limiter.release("a");
    expect(limiter.tryAcquire("a")).toBe(true);
  });

  it("holds an endpoint that times out to the slow limit until it answers again", () => {
    const limiter = new EndpointLimiter({ limit: 5, slowLimit: 1, timeoutMs: 1000 });
    limiter.tryAcquire("a");
    limiter.release("a", true);
    expect([limiter.tryAcquire("a"), limiter.tryAcquire("a")]).toEqual([true, false]);
    limiter.release("a", false);
    expect([limiter.tryAcquire("a"), limiter.tryAcquire("a")]).toEqual([true, true]);
  });

  it("defers longer for slow endpoints and for jobs turned away repeatedly, capped at a minute, with up to 100% jitter", () => {
    const limiter = new EndpointLimiter({ limit: 1, timeoutMs: 10_000, random: () => 0 });
    expect(limiter.deferDelay("a", 0)).toBe(100);
    expect(limiter.deferDelay("a", 3)).toBe(800);
    limiter.tryAcquire("a");
    limiter.release("a", true);
    expect(limiter.deferDelay("a", 0)).toBe(5000);
    expect(limiter.deferDelay("a", 10)).toBe(60_000);
    const jittered = new EndpointLimiter({ limit: 1, timeoutMs: 10_000, random: () => 0.999 });
    expect(jittered.deferDelay("b", 0)).toBe(200);
  });
});

describe("failureCounterChanges", () => {
  const result = (endpointId: string, succeeded: boolean, counts = true) => ({ endpointId, succeeded, counts }) as AttemptResult;

  it("adds failures, restarts after a success, and ignores attempts that do not count", () => {
    const changes = failureCounterChanges([
      result("a", false),
      result("a", false),
      result("b", false),
      result("b", true),
      result("b", false),
      result("c", true),
      result("d", false, false),
    ]);
    expect(Object.fromEntries(changes)).toEqual({ a: { reset: false, n: 2 }, b: { reset: true, n: 1 }, c: { reset: true, n: 0 } });
  });
});
