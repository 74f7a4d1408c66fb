/**
 * Throttling of failed authentication, shared by every replica of a service through Redis: once a
 * client has failed `maxFailures` times within `windowMs` (each of those failures answered as
 * usual, 401), every credential it presents, a valid one included, is answered 429 with
 * `Retry-After` until the window that started with its first failure ends. Refusing valid
 * credentials too is the point: if a guess were still checked and let through when right, an
 * attacker would lose nothing by being throttled.
 *
 * - A check reserves a slot BEFORE the credential is looked at (auth-throttle-counters.ts): a
 *   slot is free while the client's failures plus its checks in flight stay under the limit; a
 *   failure keeps its slot, anything else gives it back. So at most `maxFailures` credentials of
 *   one client are ever checked per window, however many requests it sends at once: a burst of
 *   300 guesses gets its first `maxFailures` checked and the rest 429, the right credential among
 *   them included. A client's requests beyond the free slots wait for them (in this process in
 *   arrival order, on other replicas by polling), so a legitimate client sending many requests at
 *   once is slowed by a round trip, never refused while it does not fail.
 * - One hash per (scope, client), a single Redis key (`<REDIS_KEY_PREFIX>:auth-failures:<scope>:<client>`,
 *   fields `failures`, `inflight`, `window`), so every script touches one key and is slot-safe on
 *   Redis Cluster. A client is its IP address; an IPv6 client is its /64, which one machine
 *   usually owns whole.
 * - A credential this client presented and that checked out (in this process, within
 *   {@link VERIFIED_TTL_MS}) is checked again without a slot: comparing a request's credential
 *   with one the same client has already proved it holds tells a guesser nothing, so the limit on
 *   guesses holds, and a busy legitimate client pays one read of its counter per request instead
 *   of a slot's two scripts. Only a digest of it is kept. A throttled client is still refused
 *   first, whatever it presents: at once when this process blocked it, and when another replica
 *   did, from the next read of its shared counter. That read is made at most once per client and
 *   {@link SHARED_BLOCK_RECHECK_MS} (concurrent requests share it): a busy client's requests cost
 *   no round trip each, and a remembered credential that another replica's block lets through
 *   meanwhile is one the client already proved it holds. A remembered credential that fails
 *   (revoked since) is forgotten, and its next try takes a slot again.
 * - Every slot is also taken from the process's own counters in memory, and a check needs both:
 *   so one process never checks more than `maxFailures` of a client's credentials per window,
 *   whatever Redis answers and however late. Redis down or slow (no answer within
 *   `redisTimeoutMs`): those counters alone answer (the same limits, per replica), and one warning
 *   is logged per outage; nobody is locked out by the outage itself and nothing crashes. Without
 *   them, a reservation that timed out and was granted in memory was a check Redis never counted,
 *   and a burst on a slow machine got more than `maxFailures` guesses checked.
 */
import { createHash, randomBytes } from "node:crypto";
import { isIP } from "node:net";
import type { Request } from "express";
import { LRUCache } from "lru-cache";
import { BLOCKED_SCRIPT, FAIL_SCRIPT, LocalGate, MemoryCounters, RELEASE_SCRIPT, RESERVE_SCRIPT, type FailureCount, type Reservation, type Slot } from "./auth-throttle-counters.js";
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

/** How long a credential that checked out is remembered for its client (see the file comment). */
export const VERIFIED_TTL_MS = 600_000;

/** How long a read of a client's shared counter that found it unblocked stands for its remembered credentials. */
export const SHARED_BLOCK_RECHECK_MS = 1_000;

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
  /** How long a Redis command may take before the in-memory fallback answers; 500 ms by default. */
  redisTimeoutMs?: number;
  /** How long a check waits for a slot held by checks in flight on other replicas before 429; 5000 ms by default. */
  busyWaitMs?: number;
}

/** Whether an error of a credential check is a failure that counts (a wrong or unknown credential). */
export type FailurePredicate = (err: unknown) => boolean;

/** The default: a 401 other than "no credential at all" counts. */
export const countsAsAuthFailure: FailurePredicate = (err) => err instanceof AppError && err.status === 401 && err.code !== "missing-token";

/** One check's slots: in this process's counters, and in Redis's when it granted one in time. */
interface Slots {
  local: Slot;
  shared: Slot | null;
}

/** Counts failed authentications per client and refuses throttled clients (see the file comment). */
export class AuthThrottle {
  private readonly now: () => number;
  private readonly keyBase: string;
  /** Clients known to be over the limit, until when: refused without a round trip. */
  private readonly blocked = new LRUCache<string, number>({ max: 100_000 });
  /** Digests of (client, credential) that checked out lately (see the file comment). */
  private readonly verified: LRUCache<string, true>;
  /** Clients whose shared counter was read unblocked, until when that read stands. */
  private readonly clearUntil = new LRUCache<string, number>({ max: 100_000 });
  /** The reads of shared counters in flight, by client: concurrent requests wait for the same one. */
  private readonly reading = new Map<string, Promise<void>>();
  private readonly memory: MemoryCounters;
  private readonly gate: LocalGate;
  private fallingBack = false;

  constructor(private readonly options: AuthThrottleOptions) {
    this.now = options.now ?? Date.now;
    this.keyBase = `${options.keyPrefix.replace(/:+$/, "")}:auth-failures:${options.scope}:`;
    this.memory = new MemoryCounters(options.maxFailures, options.windowMs, this.now);
    this.gate = new LocalGate(options.maxFailures);
    this.verified = new LRUCache({ max: 10_000, ttl: VERIFIED_TTL_MS, ttlAutopurge: false, perf: { now: () => this.now() } });
  }

  /**
   * Runs a credential check for `client` once it holds a slot: refuses a throttled client with 429
   * before checking; when the check throws a counting failure, the slot is kept as that failure;
   * otherwise it is given back. Other outcomes pass through unchanged. `credential`, when given, is
   * what the request presents: one that checked out for this client lately is checked without a
   * slot (see the file comment).
   */
  async guard<T>(client: string, check: () => T | Promise<T>, counts: FailurePredicate = countsAsAuthFailure, credential?: string): Promise<T> {
    const id = clientId(client);
    this.refuseIfBlocked(id);
    const known = credential === undefined ? undefined : createHash("sha256").update(id).update("\0").update(credential).digest("base64");
    if (known !== undefined && this.verified.get(known) === true) {
      // No slot, but a block decided on another replica holds here too (one read, no script write).
      await this.refuseIfBlockedElsewhere(id);
      try {
        return await check();
      } catch (err) {
        this.verified.delete(known);
        throw err;
      }
    }
    await this.gate.enter(id);
    let slots: Slots;
    try {
      // Blocked while it waited in the gate: the queue drains with 429s, one wake-up after another.
      this.refuseIfBlocked(id);
      slots = await this.reserve(id);
    } catch (err) {
      this.gate.leave(id);
      throw err;
    }
    let result: T;
    try {
      result = await check();
    } catch (err) {
      if (!counts(err)) {
        await this.release(slots);
        this.gate.leave(id);
        throw err;
      }
      const counter = await this.recordFailure(slots);
      this.gate.leave(id);
      if (counter.failures >= this.options.maxFailures) {
        this.blocked.set(id, counter.resetAt);
        if (counter.failures === this.options.maxFailures) {
          this.options.logger.warn({ scope: this.options.scope, client: id, failures: counter.failures }, "authentication throttled: too many failures from one client");
        }
      }
      throw err;
    }
    // The release is sent before the gate lets the next check of this client go (one connection
    // keeps commands in order), and not awaited: a success costs its request no second round trip.
    void this.release(slots);
    this.gate.leave(id);
    if (known !== undefined) this.verified.set(known, true);
    return result;
  }

  private refuseIfBlocked(id: string): void {
    const blockedUntil = this.blocked.get(id);
    if (blockedUntil === undefined) return;
    if (blockedUntil > this.now()) throw this.tooMany(blockedUntil);
    this.blocked.delete(id);
  }

  /**
   * 429 when the client's shared counter (Redis, or this process's during an outage) says it is
   * blocked; read at most once per {@link SHARED_BLOCK_RECHECK_MS} while it says not.
   */
  private async refuseIfBlockedElsewhere(id: string): Promise<void> {
    const clear = this.clearUntil.get(id);
    if (clear !== undefined && clear > this.now()) return;
    let read = this.reading.get(id);
    if (read === undefined) {
      read = this.readSharedCounter(id).finally(() => this.reading.delete(id));
      this.reading.set(id, read);
    }
    await read;
    this.refuseIfBlocked(id);
  }

  /** Reads whether `id` is blocked: remembered in `blocked` when it is, in `clearUntil` when Redis says it is not. */
  private async readSharedCounter(id: string): Promise<void> {
    const answer = await this.redisCall(BLOCKED_SCRIPT, id, String(this.options.maxFailures));
    const resetAt = answer === null ? this.memory.blockedUntil(id) : Number(answer[0]) === 1 ? this.now() + Math.max(0, Number(answer[1])) : null;
    if (resetAt !== null) {
      this.clearUntil.delete(id);
      this.blocked.set(id, resetAt);
    } else if (answer !== null) {
      this.clearUntil.set(id, this.now() + SHARED_BLOCK_RECHECK_MS);
    }
  }

  /**
   * A slot for one check of `id`, in this process's counters and in Redis's (when it answers),
   * waiting while every free slot is in flight; 429 once either says blocked.
   */
  private async reserve(id: string): Promise<Slots> {
    const deadline = this.now() + (this.options.busyWaitMs ?? 5_000);
    for (let pause = 2; ; pause = Math.min(pause * 2, 50)) {
      const answer = await this.reserveOnce(id);
      if (answer.kind === "granted") return answer.slots;
      if (answer.kind === "blocked") {
        this.blocked.set(id, answer.resetAt);
        throw this.tooMany(answer.resetAt);
      }
      // Busy: this process holds at most `maxFailures` slots of a client (the gate), so the others
      // are held on other replicas, each for about one round trip.
      if (this.now() >= deadline) {
        throw new AppError(429, "too-many-failed-attempts", "Too many authentications from this address are in progress at once; retry shortly.", {
          headers: { "Retry-After": "1" },
        });
      }
      await new Promise((resolve) => setTimeout(resolve, pause * (0.5 + Math.random())));
    }
  }

  private async reserveOnce(id: string): Promise<{ kind: "granted"; slots: Slots } | Exclude<Reservation, { kind: "granted" }>> {
    const local = this.memory.reserve(id);
    if (local.kind !== "granted") return local;
    const window = randomBytes(9).toString("base64url");
    const answer = await this.redisCall(RESERVE_SCRIPT, id, String(this.options.maxFailures), String(this.options.windowMs), window);
    if (answer === null) return { kind: "granted", slots: { local: local.slot, shared: null } };
    const [granted, ttl, granting] = answer as [number, number, string];
    if (Number(granted) === 1) return { kind: "granted", slots: { local: local.slot, shared: { id, where: "redis", window: String(granting) } } };
    this.memory.release(local.slot);
    return Number(granted) === 0 ? { kind: "blocked", resetAt: this.now() + Math.max(0, Number(ttl)) } : { kind: "busy" };
  }

  /** Counts a failure in both counters; the larger count decides (Redis's holds every replica's). */
  private async recordFailure(slots: Slots): Promise<FailureCount> {
    const local = this.memory.fail(slots.local);
    if (slots.shared === null) return local;
    const fresh = randomBytes(9).toString("base64url");
    const answer = await this.redisCall(FAIL_SCRIPT, slots.shared.id, slots.shared.window, String(this.options.windowMs), fresh);
    if (answer === null) return local;
    const [failures, ttl] = answer as [number, number];
    const shared = { failures: Number(failures), resetAt: this.now() + Math.max(0, Number(ttl)) };
    return shared.failures >= local.failures ? shared : local;
  }

  private async release(slots: Slots): Promise<void> {
    this.memory.release(slots.local);
    if (slots.shared !== null) await this.redisCall(RELEASE_SCRIPT, slots.shared.id, slots.shared.window);
  }

  /**
   * Runs one script on the client's key; null when Redis is absent, failing or too slow (then the
   * memory counters answer). The command is sent before the first `await`, so calls made one after
   * another reach Redis in that order.
   */
  private async redisCall(script: string, id: string, ...args: string[]): Promise<unknown[] | null> {
    const redis = this.options.redis;
    if (redis === null) return null;
    let sent: Promise<unknown> | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      sent = redis.eval(script, 1, this.keyBase + id, ...args);
      const timeoutMs = this.options.redisTimeoutMs ?? 500;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      });
      const answer = (await Promise.race([sent, timeout])) as unknown[];
      if (this.fallingBack) {
        this.fallingBack = false;
        this.options.logger.info({ scope: this.options.scope }, "authentication throttle: Redis answers again; failures are counted across replicas");
      }
      return answer;
    } catch (err) {
      // A late answer or error of the abandoned command must not surface as an unhandled rejection.
      sent?.catch(() => undefined);
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
