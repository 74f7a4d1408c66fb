/**
 * Throttling of failed authentication, shared by every replica of a service through Redis: once a
 * client has failed `maxFailures` times within `windowMs` (each of those failures answered as
 * usual, 401), every credential it presents, a valid one included, is answered 429 with
 * `Retry-After` until the window that started with its first failure ends. Refusing valid
 * credentials too is the point: if a guess were still checked and let through when right, an
 * attacker would lose nothing by being throttled.
 *
 * - One counter per (scope, client), a single Redis key (`<REDIS_KEY_PREFIX>:auth-failures:<scope>:<client>`),
 *   so every operation touches one key and is slot-safe on Redis Cluster. A client is its IP
 *   address; an IPv6 client is its /64, which one machine usually owns whole.
 * - Only failures write. A request's check reads the counter, and a replica that has just seen the
 *   counter under the limit trusts that for `checkCacheMs` (1 s by default), so a busy legitimate
 *   client costs one read a second, not one per request. The replica that counts the failure
 *   reaching the limit knows at once; another one within `checkCacheMs`, and before that it checks
 *   at most one more credential of that client (its failure returns the count, over the limit).
 * - Redis down or slow (no answer within `redisTimeoutMs`): the process falls back to counting in
 *   memory (the same limits, per replica) and logs one warning per outage; nobody is locked out
 *   by the outage itself and nothing crashes.
 */
import { isIP } from "node:net";
import type { Request } from "express";
import { LRUCache } from "lru-cache";
import { AppError } from "./errors.js";
import type { Logger } from "./logger.js";

/**
 * The Redis commands the throttle needs: the service's connection of `createRedisConnection`
 * (@vw/queues), a Redis (standalone or behind Sentinel) or a Cluster, which routes each script by
 * its one key.
 */
export interface ThrottleRedis {
  eval(script: string, numkeys: number, ...args: string[]): Promise<unknown>;
}

/** Limits of {@link AuthThrottle}, from AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S. */
export interface AuthThrottleLimits {
  /** Failures a client may have in one window; from then on its requests are refused. */
  maxFailures: number;
  /** Length of a window, from a client's first failure. */
  windowMs: number;
}

/** Defaults of AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S. */
export const DEFAULT_AUTH_THROTTLE: Readonly<AuthThrottleLimits> = Object.freeze({ maxFailures: 20, windowMs: 60_000 });

/** What an {@link AuthThrottle} is built from. */
export interface AuthThrottleOptions extends AuthThrottleLimits {
  /** The service's Redis connection; null counts in memory only (tests, a process without Redis). */
  redis: ThrottleRedis | null;
  /** REDIS_KEY_PREFIX of the service (trailing colons dropped). */
  keyPrefix: string;
  /** The kind of credential (`admin-token`, `api-key`...): counters of different kinds are apart. */
  scope: string;
  logger: Logger;
  /** Clock in milliseconds; the system clock unless injected. */
  now?: () => number;
  /** How long a replica trusts a counter read under the limit; 1000 ms by default. */
  checkCacheMs?: number;
  /** How long a Redis command may take before the in-memory fallback answers; 500 ms by default. */
  redisTimeoutMs?: number;
}

/** Whether an error of a credential check is a failure that counts (a wrong or unknown credential). */
export type FailurePredicate = (err: unknown) => boolean;

/** The default: a 401 other than "no credential at all" counts. */
export const countsAsAuthFailure: FailurePredicate = (err) => err instanceof AppError && err.status === 401 && err.code !== "missing-token";

// KEYS: counter. ARGV: window ms. Returns {failures, ms left}. The expiry is set with the first
// failure only, so a window ends on time however many failures follow.
const FAIL_SCRIPT = `
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`;

// KEYS: counter. Returns {failures, ms left}.
const READ_SCRIPT = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
return {n, redis.call('PTTL', KEYS[1])}`;

interface Counter {
  failures: number;
  /** When the window ends (epoch ms). */
  resetAt: number;
}

/** Counts failed authentications per client and refuses throttled clients (see the file comment). */
export class AuthThrottle {
  private readonly now: () => number;
  private readonly keyBase: string;
  /** Clients known to be over the limit, until when. */
  private readonly blocked = new LRUCache<string, number>({ max: 100_000 });
  /** Clients whose counter was read under the limit, until when that read is trusted. */
  private readonly clear = new LRUCache<string, number>({ max: 100_000 });
  /** The in-memory counters used while Redis does not answer. */
  private readonly local = new LRUCache<string, Counter>({ max: 100_000 });
  private fallingBack = false;

  constructor(private readonly options: AuthThrottleOptions) {
    this.now = options.now ?? Date.now;
    this.keyBase = `${options.keyPrefix.replace(/:+$/, "")}:auth-failures:${options.scope}:`;
  }

  /**
   * Runs a credential check for `client`: refuses a throttled client with 429 before checking;
   * when the check throws a counting failure, counts it (the failure that reaches the limit is
   * still answered as it is; a later one that slipped through another replica gets 429). Other
   * outcomes pass through unchanged.
   */
  async guard<T>(client: string, check: () => T | Promise<T>, counts: FailurePredicate = countsAsAuthFailure): Promise<T> {
    const id = clientId(client);
    await this.assertAllowed(id);
    try {
      return await check();
    } catch (err) {
      if (!counts(err)) throw err;
      const counter = await this.recordFailure(id);
      if (counter.failures >= this.options.maxFailures) {
        this.blocked.set(id, counter.resetAt);
        if (counter.failures === this.options.maxFailures) {
          this.options.logger.warn({ scope: this.options.scope, client: id, failures: counter.failures }, "authentication throttled: too many failures from one client");
        }
        // Past the limit (checked on a replica that had not seen the block yet): refused like any other request now.
        if (counter.failures > this.options.maxFailures) throw this.tooMany(counter.resetAt);
      }
      throw err;
    }
  }

  /** Throws the 429 when `client` (an id from {@link clientId}) is over the limit. */
  private async assertAllowed(id: string): Promise<void> {
    const now = this.now();
    const blockedUntil = this.blocked.get(id);
    if (blockedUntil !== undefined) {
      if (blockedUntil > now) throw this.tooMany(blockedUntil);
      this.blocked.delete(id);
    }
    const clearUntil = this.clear.get(id);
    if (clearUntil !== undefined && clearUntil > now) return;
    const counter = await this.read(id);
    if (counter.failures >= this.options.maxFailures && counter.resetAt > now) {
      this.blocked.set(id, counter.resetAt);
      throw this.tooMany(counter.resetAt);
    }
    this.clear.set(id, now + (this.options.checkCacheMs ?? 1_000));
  }

  private async read(id: string): Promise<Counter> {
    const answer = await this.redisCall(READ_SCRIPT, id);
    if (answer !== null) return answer;
    const counter = this.local.get(id);
    return counter !== undefined && counter.resetAt > this.now() ? counter : { failures: 0, resetAt: 0 };
  }

  private async recordFailure(id: string): Promise<Counter> {
    // A failure makes the next check read again: the cached "under the limit" is stale now.
    this.clear.delete(id);
    const answer = await this.redisCall(FAIL_SCRIPT, id, String(this.options.windowMs));
    if (answer !== null) return answer;
    const now = this.now();
    const current = this.local.get(id);
    const counter = current !== undefined && current.resetAt > now ? { failures: current.failures + 1, resetAt: current.resetAt } : { failures: 1, resetAt: now + this.options.windowMs };
    this.local.set(id, counter);
    return counter;
  }

  /** Runs one script on the client's key; null when Redis is absent, failing or too slow (then the fallback counts). */
  private async redisCall(script: string, id: string, ...args: string[]): Promise<Counter | null> {
    const redis = this.options.redis;
    if (redis === null) return null;
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${this.options.redisTimeoutMs ?? 500} ms`)), this.options.redisTimeoutMs ?? 500);
      });
      const [failures, ttl] = (await Promise.race([redis.eval(script, 1, this.keyBase + id, ...args), timeout])) as [number, number];
      if (this.fallingBack) {
        this.fallingBack = false;
        this.options.logger.info({ scope: this.options.scope }, "authentication throttle: Redis answers again; failures are counted across replicas");
      }
      return { failures: Number(failures), resetAt: this.now() + Math.max(0, Number(ttl)) };
    } catch (err) {
      if (!this.fallingBack) {
        this.fallingBack = true;
        this.options.logger.warn(
          { scope: this.options.scope, err: err instanceof Error ? err.message : String(err) },
          "authentication throttle: Redis unavailable; counting failures in this process only until it answers again",
        );
      }
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  private tooMany(resetAt: number): AppError {
    const seconds = Math.max(1, Math.ceil((resetAt - this.now()) / 1000));
    return new AppError(429, "too-many-failed-attempts", `Too many failed authentications from this address; every credential is refused for ${seconds} more seconds.`, {
      headers: { "Retry-After": String(seconds) },
    });
  }
}

/**
 * The identity a client is throttled by: its IPv4 address, or the /64 of its IPv6 address (an
 * IPv4-mapped IPv6 address is its IPv4). Anything else is used as it is.
 */
export function clientId(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (isIP(address) !== 6) return address;
  return `${expandIpv6(address).slice(0, 4).join(":")}::/64`;
}

/** The eight groups of an IPv6 address, zero-padded. */
function expandIpv6(address: string): string[] {
  const [head = "", tail] = address.replace(/%.*$/, "").toLowerCase().split("::");
  const parts = (s: string) => (s === "" ? [] : s.split(":"));
  const left = parts(head);
  const right = tail === undefined ? [] : parts(tail);
  const groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right];
  return groups.map((g) => g.padStart(4, "0"));
}

/**
 * The address of the client of `req`: `req.ip`, which honours the app's `trust proxy` setting
 * (TRUST_PROXY), else the socket's peer address.
 */
export function clientAddress(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? "unknown";
}
