/**
 * The failed-authentication throttle against the run's real Redis: counters shared by two
 * "replicas" (two throttles on one prefix), other clients never refused, the window, and what
 * happens when Redis refuses connections or stops answering (in-memory fallback, one warning).
 */
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Redis } from "ioredis";
import { eventually, testKeyPrefix } from "@vw/testing";
import { AuthThrottle, clientId, SHARED_BLOCK_RECHECK_MS, type AuthThrottleOptions, type ThrottleRedis } from "./auth-throttle.js";
import { AppError } from "./errors.js";
import type { Logger } from "./logger.js";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
let redis: Redis;
const prefix = testKeyPrefix("throttle-");

interface Line {
  level: string;
  fields: unknown;
  msg: unknown;
}
function recordingLogger(lines: Line[]): Logger {
  const record = (level: string) => (fields: unknown, msg?: unknown) => void lines.push({ level, fields, msg });
  const logger = { trace: record("trace"), debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error"), fatal: record("fatal"), child: () => logger };
  return logger as unknown as Logger;
}

const SECRET = "the-right-credential";
/** A credential check as a service makes one: 401 for anything but the secret. */
const check = (presented: string) => () => {
  if (presented !== SECRET) throw new AppError(401, "invalid-token", "wrong");
  return "ok";
};

/** The status a guarded check ends with: 200 for a pass, else the AppError's status. */
async function attempt(throttle: AuthThrottle, client: string, presented: string): Promise<{ status: number; retryAfter?: string }> {
  try {
    await throttle.guard(client, check(presented));
    return { status: 200 };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const retryAfter = err.extras.headers?.["Retry-After"];
    return retryAfter === undefined ? { status: err.status } : { status: err.status, retryAfter };
  }
}

function throttleOn(client: Redis | null, overrides: Partial<AuthThrottleOptions> = {}, lines: Line[] = []): AuthThrottle {
  return new AuthThrottle({ redis: client, keyPrefix: `${prefix}:`, scope: "admin-token", maxFailures: 3, windowMs: 60_000, logger: recordingLogger(lines), ...overrides });
}

beforeAll(() => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

describe("across replicas", () => {
  it("counts one client's failures on every replica, refuses its credentials (even the right one) with 429 and Retry-After once at the limit, and never slows another client", async () => {
    const a = throttleOn(redis);
    const b = throttleOn(redis);
    const attacker = "203.0.113.7";
    const statuses = [await attempt(a, attacker, "guess-1"), await attempt(b, attacker, "guess-2"), await attempt(a, attacker, "guess-3")];
    expect(statuses.map((s) => s.status)).toEqual([401, 401, 401]);
    // The third failure reached the limit of 3: the other replica reads it and refuses the fourth guess unchecked.
    const fourth = await attempt(b, attacker, "guess-4");
    expect(fourth.status).toBe(429);
    expect(Number(fourth.retryAfter)).toBeGreaterThanOrEqual(59);
    expect(Number(fourth.retryAfter)).toBeLessThanOrEqual(60);
    // Replica a never saw the fourth failure: it reads the shared counter.
    expect((await attempt(a, attacker, SECRET)).status).toBe(429);
    expect((await attempt(b, attacker, SECRET)).status).toBe(429);
    // Another client, on either replica, before and after the block.
    expect(await attempt(a, "198.51.100.20", SECRET)).toEqual({ status: 200 });
    expect(await attempt(b, "198.51.100.20", SECRET)).toEqual({ status: 200 });
    // One key per (scope, client), under the prefix, expiring with the window.
    expect(await redis.hget(`${prefix}:auth-failures:admin-token:${attacker}`, "failures")).toBe("3");
    expect(await redis.pttl(`${prefix}:auth-failures:admin-token:${attacker}`)).toBeGreaterThan(50_000);
  });

  it("lets a client that stayed under the limit in", async () => {
    const a = throttleOn(redis);
    const client = "192.0.2.44";
    expect((await attempt(a, client, "typo")).status).toBe(401);
    expect((await attempt(a, client, "typo again")).status).toBe(401);
    expect(await attempt(a, client, SECRET)).toEqual({ status: 200 });
  });

  it("keeps the kinds of credential apart", async () => {
    const tokens = throttleOn(redis, { scope: "ingest-token", maxFailures: 1 });
    const keys = throttleOn(redis, { scope: "api-key", maxFailures: 1 });
    const client = "192.0.2.45";
    expect((await attempt(tokens, client, "x")).status).toBe(401);
    expect((await attempt(tokens, client, "y")).status).toBe(429);
    expect(await attempt(keys, client, SECRET)).toEqual({ status: 200 });
  });

  it("does not count a missing credential or an error that is not a failed authentication", async () => {
    const a = throttleOn(redis, { maxFailures: 1 });
    const client = "192.0.2.46";
    for (let i = 0; i < 3; i += 1) {
      await expect(
        a.guard(client, () => {
          throw new AppError(401, "missing-token", "none");
        }),
      ).rejects.toMatchObject({ status: 401 });
      await expect(
        a.guard(client, () => {
          throw new AppError(403, "wrong-world", "elsewhere");
        }),
      ).rejects.toMatchObject({ status: 403 });
    }
    expect(await redis.exists(`${prefix}:auth-failures:admin-token:${client}`)).toBe(0);
    expect(await attempt(a, client, SECRET)).toEqual({ status: 200 });
  });

  it("lets the client in again once its window has passed", async () => {
    const a = throttleOn(redis, { maxFailures: 1, windowMs: 300 });
    const client = "192.0.2.47";
    expect((await attempt(a, client, "x")).status).toBe(401);
    expect((await attempt(a, client, "y")).status).toBe(429);
    // The window is a key's expiry in Redis, on Redis's clock.
    await eventually("the right secret is let in once the window has passed", async () => (await attempt(a, client, SECRET)).status === 200, { timeoutMs: 10_000, intervalMs: 20 });
  });
});

describe("without Redis", () => {
  let silent: Server;
  const held = new Set<Socket>();
  beforeAll(async () => {
    // Accepts connections and never answers: a Redis that hangs.
    silent = createServer((socket) => {
      held.add(socket);
      socket.on("close", () => held.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    for (const socket of held) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it("falls back to counting in the process when Redis refuses connections: nobody is locked out, failures are still throttled, one warning", async () => {
    const down = new Redis({ host: "127.0.0.1", port: 1, enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => null });
    down.on("error", () => {});
    const lines: Line[] = [];
    const throttle = throttleOn(down, { maxFailures: 2 }, lines);
    expect(await attempt(throttle, "192.0.2.50", SECRET)).toEqual({ status: 200 });
    expect((await attempt(throttle, "192.0.2.51", "x")).status).toBe(401);
    expect((await attempt(throttle, "192.0.2.51", "y")).status).toBe(401);
    expect((await attempt(throttle, "192.0.2.51", "z")).status).toBe(429);
    expect((await attempt(throttle, "192.0.2.51", SECRET)).status).toBe(429);
    expect(await attempt(throttle, "192.0.2.50", SECRET)).toEqual({ status: 200 });
    const warnings = lines.filter((l) => l.level === "warn" && String(l.msg).includes("Redis unavailable"));
    expect(warnings).toHaveLength(1);
    down.disconnect();
  });

  it("does not wait on a Redis that stops answering longer than its timeout", async () => {
    const port = (silent.address() as AddressInfo).port;
    const hung = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1, enableReadyCheck: false, retryStrategy: () => null });
    hung.on("error", () => {});
    const lines: Line[] = [];
    const throttle = throttleOn(hung, { redisTimeoutMs: 50, maxFailures: 1 }, lines);
    expect(await attempt(throttle, "192.0.2.60", SECRET)).toEqual({ status: 200 });
    expect((await attempt(throttle, "192.0.2.61", "x")).status).toBe(401);
    expect((await attempt(throttle, "192.0.2.61", "y")).status).toBe(429);
    expect(lines.some((l) => l.level === "warn" && String(l.msg).includes("Redis unavailable"))).toBe(true);
    hung.disconnect();
  });
});

describe("a Redis that answers one reservation too late", () => {
  it("still gets at most maxFailures of a burst's guesses checked: the process's own count holds them", async () => {
    // The third script call reaches Redis only after the throttle gave up on it (a busy Redis):
    // the reservation it held up is granted in memory, and Redis counts it late or never.
    let calls = 0;
    const late: ThrottleRedis = {
      eval: async (...args) => {
        calls += 1;
        if (calls === 3) await new Promise((resolve) => setTimeout(resolve, 300));
        return redis.eval(...args);
      },
    };
    const throttle = throttleOn(null, { redis: late, redisTimeoutMs: 100, maxFailures: 3 });
    let checked = 0;
    const guess = async (i: number) => {
      try {
        await throttle.guard("192.0.2.90", () => {
          checked += 1;
          return check(`guess-${i}`)();
        });
        return 200;
      } catch (err) {
        return (err as AppError).status;
      }
    };
    const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => guess(i)));
    expect(checked).toBe(3);
    expect(statuses.filter((s) => s === 401)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(27);
  });
});

describe("clientId", () => {
  it.each([
    ["203.0.113.7", "203.0.113.7"],
    ["::ffff:203.0.113.7", "203.0.113.7"],
    ["2001:db8:1:2:3:4:5:6", "2001:0db8:0001:0002::/64"],
    ["2001:db8:1:2::99", "2001:0db8:0001:0002::/64"],
    ["2001:db8::1", "2001:0db8:0000:0000::/64"],
    ["::1", "0000:0000:0000:0000::/64"],
  ])("%s is throttled as %s", (address, id) => {
    expect(clientId(address)).toBe(id);
  });
});

describe("a credential the client proved it holds", () => {
  /** A Redis client that counts the scripts it runs (the throttle's round trips). */
  function countingRedis(): { client: Redis; calls: () => number } {
    let n = 0;
    const client = new Proxy(redis, {
      get(target, key, receiver) {
        if (key === "eval") {
          return (...args: Parameters<Redis["eval"]>) => {
            n += 1;
            return target.eval(...args);
          };
        }
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    return { client, calls: () => n };
  }
  const guarded = (throttle: AuthThrottle, client: string, presented: string) =>
    throttle.guard(client, check(presented), undefined, presented).then(
      () => 200,
      (err: unknown) => (err as AppError).status,
    );

  it("is checked again without a slot (one read of its counter per recheck interval), while every other credential still takes one", async () => {
    const counted = countingRedis();
    let clock = Date.now();
    const throttle = throttleOn(counted.client, { now: () => clock });
    const client = "198.51.100.21";
    expect(await guarded(throttle, client, SECRET)).toBe(200);
    const afterFirst = counted.calls();
    expect(afterFirst).toBe(2); // a slot: reserved, then given back
    for (let i = 0; i < 5; i += 1) expect(await guarded(throttle, client, SECRET)).toBe(200);
    expect(counted.calls()).toBe(afterFirst + 1);
    // Concurrent requests share a read; a read stands for SHARED_BLOCK_RECHECK_MS.
    clock += SHARED_BLOCK_RECHECK_MS;
    expect(await Promise.all(Array.from({ length: 20 }, () => guarded(throttle, client, SECRET)))).toEqual(Array(20).fill(200));
    expect(counted.calls()).toBe(afterFirst + 2);
    // Another client presenting the same credential proved nothing yet: it takes a slot.
    expect(await guarded(throttle, "198.51.100.22", SECRET)).toBe(200);
    expect(counted.calls()).toBe(afterFirst + 2 + 2);
    // A guess of the same client takes a slot and counts.
    expect(await guarded(throttle, client, "a-guess")).toBe(401);
  });

  it("is still refused once its client is throttled, and guesses in a burst are still capped", async () => {
    const throttle = throttleOn(redis);
    const client = "198.51.100.23";
    expect(await guarded(throttle, client, SECRET)).toBe(200);
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => guarded(throttle, client, `guess-${i}`)));
    expect(burst.filter((s) => s === 401)).toHaveLength(3);
    expect(burst.filter((s) => s === 429)).toHaveLength(27);
    expect(await guarded(throttle, client, SECRET)).toBe(429);
  });

  it("is refused, once another replica blocked its client, from the next read of its counter: at most SHARED_BLOCK_RECHECK_MS later", async () => {
    let clock = Date.now();
    const [a, b] = [throttleOn(redis, { now: () => clock }), throttleOn(redis, { now: () => clock })];
    const client = "198.51.100.26";
    expect(await guarded(b, client, SECRET)).toBe(200);
    expect(await guarded(b, client, SECRET)).toBe(200); // remembered: its counter read, unblocked
    for (let i = 0; i < 3; i += 1) expect(await guarded(a, client, `guess-${i}`)).toBe(401);
    expect(await guarded(a, client, SECRET)).toBe(429);
    // b's read still stands: a credential this client already proved it holds.
    expect(await guarded(b, client, SECRET)).toBe(200);
    // Any other credential takes a slot, and there is none.
    expect(await guarded(b, client, "another-guess")).toBe(429);
    clock += SHARED_BLOCK_RECHECK_MS;
    expect(await guarded(b, client, SECRET)).toBe(429);
  });

  it("is refused on every replica once another replica blocked its client", async () => {
    const [a, b] = [throttleOn(redis), throttleOn(redis)];
    const client = "198.51.100.25";
    expect(await guarded(b, client, SECRET)).toBe(200);
    for (let i = 0; i < 3; i += 1) expect(await guarded(a, client, `guess-${i}`)).toBe(401);
    expect(await guarded(b, client, SECRET)).toBe(429);
  });

  it("is forgotten when it fails (revoked since): its next try takes a slot again", async () => {
    const counted = countingRedis();
    const throttle = throttleOn(counted.client);
    const client = "198.51.100.24";
    let valid = true;
    const revocable = () => {
      if (!valid) throw new AppError(401, "invalid-token", "revoked");
      return "ok";
    };
    await throttle.guard(client, revocable, undefined, "key-1");
    valid = false;
    await expect(throttle.guard(client, revocable, undefined, "key-1")).rejects.toMatchObject({ status: 401 });
    const before = counted.calls();
    await expect(throttle.guard(client, revocable, undefined, "key-1")).rejects.toMatchObject({ status: 401 });
    expect(counted.calls()).toBeGreaterThan(before);
  });
});
