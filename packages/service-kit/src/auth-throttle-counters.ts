/**
 * The counters of the failed-authentication throttle (see auth-throttle.ts): per client, the
 * failures of the current window and the credential checks in flight, in one Redis hash, with the
 * same rules kept in memory for when Redis does not answer. A check may only start once it holds
 * a slot (`failures + inFlight < max`), so however many requests arrive at once, at most `max`
 * credentials are ever checked per window: a failure keeps its slot, a success gives it back.
 */
import { LRUCache } from "lru-cache";

/** A reserved slot: where it is held, and the window it belongs to (a release after that window ended is a no-op). */
export interface Slot {
  id: string;
  where: "redis" | "memory";
  window: string;
}

/** The answer to a reservation. */
export type Reservation =
  | { kind: "granted"; slot: Slot }
  /** The window's failures are at the limit: refuse until `resetAt`. */
  | { kind: "blocked"; resetAt: number }
  /** Under the limit, but every free slot is held by checks in flight (on other replicas too): wait. */
  | { kind: "busy" };

/** Failures of a window after a recorded failure, and when the window ends (epoch ms). */
export interface FailureCount {
  failures: number;
  resetAt: number;
}

// Hash fields: failures, inflight, window (an id; a slot names the window it was granted in).
// KEYS: counter. ARGV: max, window ms, a fresh window id. Returns {1 granted | 0 blocked | -1 busy, ms left, window id}.
export const RESERVE_SCRIPT = `
local f = tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
local i = tonumber(redis.call('HGET', KEYS[1], 'inflight') or '0')
local ttl = redis.call('PTTL', KEYS[1])
if f >= tonumber(ARGV[1]) then return {0, ttl, ''} end
if f + i >= tonumber(ARGV[1]) then return {-1, ttl, ''} end
if ttl < 0 then
  redis.call('HSET', KEYS[1], 'window', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
redis.call('HINCRBY', KEYS[1], 'inflight', 1)
return {1, ttl, redis.call('HGET', KEYS[1], 'window')}`;

// KEYS: counter. ARGV: max failures. Returns {1, ms left} when the client is blocked, {0, 0} otherwise.
// Reads only: a remembered credential's check asks whether another replica blocked the client.
export const BLOCKED_SCRIPT = `
local f = tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
if f >= tonumber(ARGV[1]) then return {1, redis.call('PTTL', KEYS[1])} end
return {0, 0}`;

// KEYS: counter. ARGV: the slot's window id, window ms, a fresh window id. Returns {failures, ms left}.
// The window runs from the first failure. A slot whose window ended meanwhile opens or joins the
// current one with its failure.
export const FAIL_SCRIPT = `
local f
if redis.call('HGET', KEYS[1], 'window') == ARGV[1] then
  redis.call('HINCRBY', KEYS[1], 'inflight', -1)
  f = redis.call('HINCRBY', KEYS[1], 'failures', 1)
  if f == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
else
  f = redis.call('HINCRBY', KEYS[1], 'failures', 1)
  if redis.call('PTTL', KEYS[1]) < 0 then
    redis.call('HSET', KEYS[1], 'window', ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
end
return {f, redis.call('PTTL', KEYS[1])}`;

// KEYS: counter. ARGV: the slot's window id. A client with nothing in flight and no failure leaves no key.
export const RELEASE_SCRIPT = `
if redis.call('HGET', KEYS[1], 'window') ~= ARGV[1] then return 0 end
local i = redis.call('HINCRBY', KEYS[1], 'inflight', -1)
if i <= 0 and tonumber(redis.call('HGET', KEYS[1], 'failures') or '0') == 0 then redis.call('DEL', KEYS[1]) end
return 1`;

interface MemoryCounter {
  failures: number;
  inFlight: number;
  window: string;
  resetAt: number;
}

/** The same counters in this process's memory: the fallback while Redis does not answer. */
export class MemoryCounters {
  private readonly counters = new LRUCache<string, MemoryCounter>({ max: 100_000 });
  private windows = 0;

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
    private readonly now: () => number,
  ) {}

  private current(id: string): MemoryCounter | undefined {
    const c = this.counters.get(id);
    if (c !== undefined && c.resetAt <= this.now()) {
      this.counters.delete(id);
      return undefined;
    }
    return c;
  }

  private open(id: string): MemoryCounter {
    const c = { failures: 0, inFlight: 0, window: `m${(this.windows += 1)}`, resetAt: this.now() + this.windowMs };
    this.counters.set(id, c);
    return c;
  }

  /** When `id` is blocked (its failures reached the limit), when that ends; null otherwise. */
  blockedUntil(id: string): number | null {
    const c = this.current(id);
    return c !== undefined && c.failures >= this.max ? c.resetAt : null;
  }

  reserve(id: string): Reservation {
    const c = this.current(id) ?? this.open(id);
    if (c.failures >= this.max) return { kind: "blocked", resetAt: c.resetAt };
    if (c.failures + c.inFlight >= this.max) return { kind: "busy" };
    c.inFlight += 1;
    return { kind: "granted", slot: { id, where: "memory", window: c.window } };
  }

  fail(slot: Slot): FailureCount {
    let c = this.current(slot.id);
    if (c !== undefined && c.window === slot.window) {
      c.inFlight -= 1;
      if (c.failures === 0) c.resetAt = this.now() + this.windowMs;
    } else {
      c ??= this.open(slot.id);
    }
    c.failures += 1;
    return { failures: c.failures, resetAt: c.resetAt };
  }

  release(slot: Slot): void {
    const c = this.current(slot.id);
    if (c === undefined || c.window !== slot.window) return;
    c.inFlight -= 1;
    if (c.inFlight <= 0 && c.failures === 0) this.counters.delete(slot.id);
  }
}

/**
 * At most `max` checks of one client at a time in this process, the others queued in arrival
 * order: a burst waits here, not in a loop of Redis round trips, and a client throttled meanwhile
 * empties the queue with 429s as each waiter wakes and sees the block.
 */
export class LocalGate {
  private readonly clients = new Map<string, { active: number; waiting: (() => void)[] }>();

  constructor(private readonly max: number) {}

  async enter(id: string): Promise<void> {
    let c = this.clients.get(id);
    if (c === undefined) this.clients.set(id, (c = { active: 0, waiting: [] }));
    if (c.active < this.max) {
      c.active += 1;
      return;
    }
    await new Promise<void>((resolve) => c.waiting.push(resolve));
  }

  /** Leaves the gate; the next waiter (if any) takes the place at once. */
  leave(id: string): void {
    const c = this.clients.get(id);
    if (c === undefined) return;
    const next = c.waiting.shift();
    if (next !== undefined) {
      next();
      return;
    }
    c.active -= 1;
    if (c.active <= 0) this.clients.delete(id);
  }
}
