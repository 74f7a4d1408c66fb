/**
 * The throttle under a burst, against the run's real Redis: a slot is reserved before each
 * credential is checked, so however many guesses arrive at once (on one replica or spread over
 * two), at most AUTH_FAILURES_MAX are ever checked per window and the right credential inside the
 * burst answers 429. A legitimate client sending many requests at once is never refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Redis } from "ioredis";
import { testKeyPrefix } from "@vw/testing";
import { AuthThrottle } from "./auth-throttle.js";
import { AppError } from "./errors.js";
import type { Logger } from "./logger.js";

const prefix = testKeyPrefix("throttle-burst-");
const SECRET = "the-right-credential";
const MAX = 5;
let redis: Redis;

const silent = (() => {
  const noop = () => undefined;
  const logger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, fatal: noop, child: () => logger };
  return logger as unknown as Logger;
})();

// A check waits for a slot up to busyWaitMs (5 s by default) before a 429: long enough here that a
// machine with busy cores only makes the burst slower, which is what these tests allow.
const replica = (client: Redis | null) =>
  new AuthThrottle({ redis: client, keyPrefix: `${prefix}:`, scope: "api-key", maxFailures: MAX, windowMs: 60_000, logger: silent, busyWaitMs: 120_000 });

/**
 * Fires `guesses` at once (guess i through `throttles[i % n]`), every check taking a turn of the
 * event loop as a database lookup would; resolves with each guess's status and how many checks ran.
 */
async function burst(throttles: AuthThrottle[], address: string, guesses: string[]): Promise<{ statuses: number[]; checked: number }> {
  let checked = 0;
  const statuses = await Promise.all(
    guesses.map(async (guess, i) => {
      try {
        await throttles[i % throttles.length]!.guard(address, async () => {
          checked += 1;
          await new Promise((resolve) => setImmediate(resolve));
          if (guess !== SECRET) throw new AppError(401, "invalid-token", "wrong");
        });
        return 200;
      } catch (err) {
        if (err instanceof AppError) return err.status;
        throw err;
      }
    }),
  );
  return { statuses, checked };
}

/** 300 guesses, the right one at position 150. */
const guesses = Array.from({ length: 300 }, (_, i) => (i === 150 ? SECRET : `guess-${i}`));
const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

describe("a burst of 300 concurrent guesses", () => {
  it.each([
    ["one replica", 1],
    ["two replicas sharing Redis", 2],
  ])("%s: checks at most AUTH_FAILURES_MAX of them and answers the right credential inside the burst 429", async (_name, replicas) => {
    const throttles = Array.from({ length: replicas }, () => replica(redis));
    const address = `203.0.113.${100 + replicas}`;
    const { statuses, checked } = await burst(throttles, address, guesses);
    expect(checked).toBe(MAX);
    expect(count(statuses, 401)).toBe(MAX);
    expect(count(statuses, 429)).toBe(300 - MAX);
    expect(statuses[150]).toBe(429);
    expect(await redis.hget(`${prefix}:auth-failures:api-key:${address}`, "failures")).toBe(String(MAX));
    expect(await redis.hget(`${prefix}:auth-failures:api-key:${address}`, "inflight")).toBe("0");
  });

  it("in memory (Redis away) the same bound holds per process", async () => {
    const { statuses, checked } = await burst([replica(null)], "203.0.113.120", guesses);
    expect(checked).toBe(MAX);
    expect(statuses[150]).toBe(429);
    expect(count(statuses, 401)).toBe(MAX);
  });
});

describe("a legitimate client sending many requests at once", () => {
  it.each([
    ["one replica", 1],
    ["two replicas sharing Redis", 2],
  ])("%s: 200 concurrent right credentials all pass (they wait for a slot, none is refused) and leave no counter", async (_name, replicas) => {
    const throttles = Array.from({ length: replicas }, () => replica(redis));
    const address = `192.0.2.${10 + replicas}`;
    const { statuses, checked } = await burst(throttles, address, Array<string>(200).fill(SECRET));
    expect(statuses).toEqual(Array(200).fill(200));
    expect(checked).toBe(200);
    // Releases are not awaited by the requests: wait for them before looking.
    await redis.ping();
    expect(await redis.exists(`${prefix}:auth-failures:api-key:${address}`)).toBe(0);
  });

  it("a few failures among many successes still leave room for the successes", async () => {
    const throttle = replica(redis);
    const address = "192.0.2.30";
    const mixed = Array.from({ length: 100 }, (_, i) => (i % 25 === 0 ? `typo-${i}` : SECRET));
    const { statuses } = await burst([throttle], address, mixed);
    expect(count(statuses, 401)).toBe(4);
    expect(count(statuses, 200)).toBe(96);
  });
});
