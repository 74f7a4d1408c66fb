/**
 * The analytics buffer: event-ingest appends privacy-processed inner analytics events to one
 * bounded Redis list per endpoint, and the delivery worker's flush pops at most one batch per
 * endpoint per run. The keys are declared here once, for both sides.
 *
 * Nothing grows without bound: each list keeps at most `max` events (the NEWEST ones: a burst
 * pushes out what was waiting longest), and every event trimmed away is added to the endpoint's
 * dropped counter, which the flush collects (and resets) for the worker's metrics and logs.
 * Both scripts run atomically, so the pending set never loses an endpoint that still has events:
 * a push adds it, and only a pop that leaves its list empty removes it.
 */
import type { Redis } from "ioredis";

/** Default ANALYTICS_BUFFER_MAX: ten full batches wait per endpoint at most. */
export const DEFAULT_ANALYTICS_BUFFER_MAX = 1000;

/** Events per RPUSH: keeps Lua's `unpack` far below its stack limit whatever the request size. */
const PUSH_CHUNK = 500;

/** The Redis keys of the analytics buffer under a deployment's `REDIS_KEY_PREFIX`. */
export function analyticsKeys(keyPrefix: string) {
  const base = `${keyPrefix.replace(/:+$/, "")}:analytics`;
  return {
    /** Set of endpoint ids whose buffer may hold events. */
    pending: `${base}:pending`,
    /** List of inner-event JSON texts waiting for the endpoint's next batch. */
    buffer: (endpointId: string) => `${base}:buf:${endpointId}`,
    /** Events trimmed from the endpoint's full buffer since the last flush collected them. */
    dropped: (endpointId: string) => `${base}:dropped:${endpointId}`,
  };
}

// KEYS: buffer, dropped, pending. ARGV: max, endpointId, events...
const PUSH_SCRIPT = `
local len = redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
local over = len - tonumber(ARGV[1])
if over > 0 then
  redis.call('LTRIM', KEYS[1], over, -1)
  redis.call('INCRBY', KEYS[2], over)
else
  over = 0
end
redis.call('SADD', KEYS[3], ARGV[2])
return over`;

// KEYS: buffer, dropped, pending. ARGV: count, endpointId. Returns {events, dropped since last pop, left}.
const POP_SCRIPT = `
local events = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
if not events then events = {} end
local left = redis.call('LLEN', KEYS[1])
if left == 0 then redis.call('SREM', KEYS[3], ARGV[2]) end
local dropped = tonumber(redis.call('GET', KEYS[2]) or '0')
if dropped > 0 then redis.call('DEL', KEYS[2]) end
return {events, dropped, left}`;

/**
 * Appends `events` (JSON texts) to the endpoint's buffer, keeping the newest `max`; resolves with
 * how many events were trimmed away (also added to the endpoint's dropped counter).
 */
export async function pushAnalyticsEvents(redis: Redis, keyPrefix: string, endpointId: string, events: readonly string[], max: number): Promise<number> {
  const keys = analyticsKeys(keyPrefix);
  let trimmed = 0;
  for (let i = 0; i < events.length; i += PUSH_CHUNK) {
    const chunk = events.slice(i, i + PUSH_CHUNK);
    const over = await redis.eval(PUSH_SCRIPT, 3, keys.buffer(endpointId), keys.dropped(endpointId), keys.pending, String(max), endpointId, ...chunk);
    trimmed += Number(over);
  }
  return trimmed;
}

/** What one pop took from an endpoint's buffer. */
export interface AnalyticsPop {
  /** Up to `count` inner-event JSON texts, oldest first. */
  events: string[];
  /** Events trimmed from the full buffer since the previous pop (the counter is reset). */
  dropped: number;
  /** Events still waiting after this pop. */
  left: number;
}

/** Atomically takes up to `count` events of the endpoint, collects its dropped counter, and unregisters it when its buffer is empty. */
export async function popAnalyticsEvents(redis: Redis, keyPrefix: string, endpointId: string, count: number): Promise<AnalyticsPop> {
  const keys = analyticsKeys(keyPrefix);
  const [events, dropped, left] = (await redis.eval(POP_SCRIPT, 3, keys.buffer(endpointId), keys.dropped(endpointId), keys.pending, String(count), endpointId)) as [
    string[],
    number,
    number,
  ];
  return { events, dropped: Number(dropped), left: Number(left) };
}

// KEYS: buffer, dropped, pending. ARGV: endpointId. Returns {events discarded, dropped since last pop}.
const DISCARD_SCRIPT = `
local n = redis.call('LLEN', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[1])
local dropped = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('DEL', KEYS[2])
return {n, dropped}`;

/**
 * Empties the buffer of an endpoint that can no longer receive analytics (deleted, disabled,
 * unsubscribed) and unregisters it; resolves with the events discarded and the dropped counter
 * collected, so both are counted.
 */
export async function discardAnalyticsBuffer(redis: Redis, keyPrefix: string, endpointId: string): Promise<{ discarded: number; dropped: number }> {
  const keys = analyticsKeys(keyPrefix);
  const [discarded, dropped] = (await redis.eval(DISCARD_SCRIPT, 3, keys.buffer(endpointId), keys.dropped(endpointId), keys.pending, endpointId)) as [number, number];
  return { discarded: Number(discarded), dropped: Number(dropped) };
}

/** Endpoint ids whose buffer may hold events. */
export function pendingAnalyticsEndpoints(redis: Redis, keyPrefix: string): Promise<string[]> {
  return redis.smembers(analyticsKeys(keyPrefix).pending);
}
