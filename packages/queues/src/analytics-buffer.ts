/**
 * The analytics buffer: event-ingest appends privacy-processed inner analytics events to one
 * bounded Redis list per endpoint, and the delivery worker's flush claims at most one batch per
 * endpoint per run. The keys are declared here once, for both sides.
 *
 * Nothing grows without bound: each list keeps at most `max` events (the NEWEST ones: a burst
 * pushes out what was waiting longest), and every event trimmed away is added to the endpoint's
 * dropped counter, which the flush collects (and resets) for the worker's metrics and logs. A
 * world is bounded too, in events (ANALYTICS_BUFFER_MAX_PER_WORLD) and in bytes
 * (ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD), {@link pushWorldAnalyticsEvents}: the events held for all
 * its endpoints, buffered and in flight, never pass either limit; events that would are not
 * buffered, and the caller counts them. The bytes are kept beside each list (a counter per
 * endpoint, and the in-flight record's `b`), moved by the same scripts that move the events.
 *
 * At least once: a claim MOVES up to one batch from the list into the endpoint's in-flight record
 * (with the deliveryId the batch will have), and only {@link releaseAnalyticsBatch}, called once
 * the delivery is committed, deletes it. A flush that fails in between
 * (database down, Redis blip, crash) leaves the record, and the next claim returns that same batch
 * with the same deliveryId instead of taking new events, so the retry stores the row once
 * (`ON CONFLICT DO NOTHING`) and wakes its endpoint again (a wake is idempotent). The
 * in-flight record holds one batch at most, so Redis stays bounded at `max` + one batch per
 * endpoint. Every script runs atomically, and the pending set keeps an endpoint while its list or
 * its in-flight record holds events: a push adds it, and only a claim or a release that finds both
 * empty removes it.
 *
 * On Redis Cluster every script touches one world's keys only: they all carry the world's hash tag
 * (`<prefix>:analytics:{w:<worldId>}:...`), so the world's bound is checked and kept atomically in
 * one slot, and worlds spread over the primaries. Which worlds have pending endpoints is a set of
 * its own (one key), kept outside the scripts: a push registers the world after its script, and
 * the flush unregisters a world only after seeing its pending set empty, then looks again, so a
 * world with events is never left unregistered by a race.
 */
import type { RedisClient } from "./redis-connection.js";

/** Default ANALYTICS_BUFFER_MAX: ten full batches wait per endpoint at most. */
export const DEFAULT_ANALYTICS_BUFFER_MAX = 1000;

/** Default ANALYTICS_BUFFER_MAX_PER_WORLD: events held in Redis for one world, all its endpoints together. */
export const DEFAULT_ANALYTICS_BUFFER_MAX_PER_WORLD = 10_000;

/**
 * Default ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD: bytes of events held in Redis for one world, all
 * its endpoints' copies together. 16 MiB: a thousand events of the largest size allowed
 * (ANALYTICS_EVENT_MAX_BYTES, 16 KiB), or the whole 10,000-event default of events of 1.6 KB.
 */
export const DEFAULT_ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD = 16 * 1024 * 1024;

/** Events per RPUSH: keeps Lua's `unpack` far below its stack limit whatever the request size. */
const PUSH_CHUNK = 500;

/** The Redis keys of one world's analytics buffers under a deployment's `REDIS_KEY_PREFIX`. */
export function analyticsKeys(keyPrefix: string, worldId: string) {
  const base = `${keyPrefix.replace(/:+$/, "")}:analytics:{w:${worldId}}`;
  return {
    /** Set of the world's endpoint ids whose buffer or in-flight batch may hold events. */
    pending: `${base}:pending`,
    /** List of inner-event JSON texts waiting for the endpoint's next batch. */
    buffer: (endpointId: string) => `${base}:buf:${endpointId}`,
    /** Events trimmed from the endpoint's full buffer since the last flush collected them. */
    dropped: (endpointId: string) => `${base}:dropped:${endpointId}`,
    /** Hash `{id, events, n, b}`: the batch claimed by a flush and not yet stored and queued (`b`: its bytes). */
    inflight: (endpointId: string) => `${base}:inflight:${endpointId}`,
    /** Bytes of the events in the endpoint's buffer list. */
    bytes: (endpointId: string) => `${base}:bytes:${endpointId}`,
  };
}

/** The set of world ids that may have pending analytics endpoints. */
export function analyticsWorldsKey(keyPrefix: string): string {
  return `${keyPrefix.replace(/:+$/, "")}:analytics:worlds`;
}

/** Registers a world as having pending endpoints (after its push script). */
async function registerWorld(redis: RedisClient, keyPrefix: string, worldId: string): Promise<void> {
  await redis.sadd(analyticsWorldsKey(keyPrefix), worldId);
}

// Trims the oldest `over` events of a list (KEYS[k]) and takes their bytes off its counter (KEYS[k + 3]).
const TRIM_OLDEST = `
local function trimOldest(list, counter, over)
  local gone = 0
  for _, v in ipairs(redis.call('LRANGE', list, 0, over - 1)) do gone = gone + string.len(v) end
  redis.call('LTRIM', list, over, -1)
  redis.call('DECRBY', counter, gone)
end`;

// KEYS: buffer, dropped, pending, bytes. ARGV: max, endpointId, events...
const PUSH_SCRIPT = `${TRIM_OLDEST}
local size = 0
for i = 3, #ARGV do size = size + string.len(ARGV[i]) end
local len = redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
redis.call('INCRBY', KEYS[4], size)
local over = len - tonumber(ARGV[1])
if over > 0 then
  trimOldest(KEYS[1], KEYS[4], over)
  redis.call('INCRBY', KEYS[2], over)
else
  over = 0
end
redis.call('SADD', KEYS[3], ARGV[2])
return over`;

/**
 * Appends `events` (JSON texts) to the endpoint's buffer, keeping the newest `max`; resolves with
 * how many events were trimmed away (also added to the endpoint's dropped counter).
 */
export async function pushAnalyticsEvents(redis: RedisClient, keyPrefix: string, worldId: string, endpointId: string, events: readonly string[], max: number): Promise<number> {
  const keys = analyticsKeys(keyPrefix, worldId);
  let trimmed = 0;
  for (let i = 0; i < events.length; i += PUSH_CHUNK) {
    const chunk = events.slice(i, i + PUSH_CHUNK);
    const over = await redis.eval(PUSH_SCRIPT, 4, keys.buffer(endpointId), keys.dropped(endpointId), keys.pending, keys.bytes(endpointId), String(max), endpointId, ...chunk);
    trimmed += Number(over);
  }
  await registerWorld(redis, keyPrefix, worldId);
  return trimmed;
}

// KEYS: pending, then buffer, dropped, inflight, bytes of each endpoint. ARGV: max per endpoint,
// max events for the world, max bytes for the world, number of endpoints, endpoint ids, events.
// Every event goes to every endpoint, so the world has room for floor(room / endpoints) of them
// and for as many of their bytes, times the endpoints, as its byte limit leaves; the first that
// fit both are pushed, the rest not. Returns {events pushed to each endpoint, then the events
// trimmed from each endpoint's buffer}.
const WORLD_PUSH_SCRIPT = `${TRIM_OLDEST}
local perEndpoint = tonumber(ARGV[1])
local worldMax = tonumber(ARGV[2])
local worldMaxBytes = tonumber(ARGV[3])
local e = tonumber(ARGV[4])
local held = 0
local heldBytes = 0
for i = 0, e - 1 do
  local k = 2 + 4 * i
  held = held + redis.call('LLEN', KEYS[k]) + tonumber(redis.call('HGET', KEYS[k + 2], 'n') or '0')
  heldBytes = heldBytes + tonumber(redis.call('GET', KEYS[k + 3]) or '0') + tonumber(redis.call('HGET', KEYS[k + 2], 'b') or '0')
end
local first = 5 + e
local n = #ARGV - first + 1
local fit = math.floor((worldMax - held) / e)
if fit > n then fit = n end
local copyBytes = 0
for j = 0, fit - 1 do
  local size = string.len(ARGV[first + j])
  if heldBytes + (copyBytes + size) * e > worldMaxBytes then
    fit = j
    break
  end
  copyBytes = copyBytes + size
end
local out = {0}
if fit <= 0 then return out end
out[1] = fit
for i = 0, e - 1 do
  local k = 2 + 4 * i
  local len = redis.call('RPUSH', KEYS[k], unpack(ARGV, first, first + fit - 1))
  redis.call('INCRBY', KEYS[k + 3], copyBytes)
  local over = len - perEndpoint
  if over > 0 then
    trimOldest(KEYS[k], KEYS[k + 3], over)
    redis.call('INCRBY', KEYS[k + 1], over)
  else
    over = 0
  end
  out[2 + i] = over
  redis.call('SADD', KEYS[1], ARGV[5 + i])
end
return out`;

/** What {@link pushWorldAnalyticsEvents} did. */
export interface WorldPushResult {
  /** Events buffered for every endpoint. */
  buffered: number;
  /** Events trimmed from each endpoint's full buffer, by endpoint id (also added to its dropped counter). */
  trimmed: Map<string, number>;
  /** Copies (event × endpoint) not buffered because the world is at one of its limits. */
  refused: number;
}

/**
 * Appends `events` (JSON texts) to the buffer of each of one world's `endpointIds`, keeping each
 * buffer's newest `perEndpointMax` (trimmed ones counted as {@link pushAnalyticsEvents} does) and
 * the world's events held in Redis (every endpoint's buffer and in-flight batch) at `worldMax` at
 * most, and their bytes at `worldMaxBytes` (16 MiB by default): events that would pass either are
 * not buffered (the first ones that fit are). Each chunk of events is checked and pushed in one
 * script, so concurrent requests of one world cannot together pass the limits.
 */
export async function pushWorldAnalyticsEvents(
  redis: RedisClient,
  keyPrefix: string,
  worldId: string,
  endpointIds: readonly string[],
  events: readonly string[],
  limits: { perEndpointMax: number; worldMax: number; worldMaxBytes?: number },
): Promise<WorldPushResult> {
  const result: WorldPushResult = { buffered: 0, trimmed: new Map(), refused: 0 };
  if (endpointIds.length === 0) return result;
  const keys = analyticsKeys(keyPrefix, worldId);
  const scriptKeys = [keys.pending, ...endpointIds.flatMap((id) => [keys.buffer(id), keys.dropped(id), keys.inflight(id), keys.bytes(id)])];
  for (let i = 0; i < events.length; i += PUSH_CHUNK) {
    const chunk = events.slice(i, i + PUSH_CHUNK);
    const [fit = 0, ...trimmed] = (await redis.eval(
      WORLD_PUSH_SCRIPT,
      scriptKeys.length,
      ...scriptKeys,
      String(limits.perEndpointMax),
      String(limits.worldMax),
      String(limits.worldMaxBytes ?? DEFAULT_ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD),
      String(endpointIds.length),
      ...endpointIds,
      ...chunk,
    )) as number[];
    result.buffered += Number(fit);
    trimmed.forEach((n, i) => {
      const id = endpointIds[i] as string;
      if (Number(n) > 0) result.trimmed.set(id, (result.trimmed.get(id) ?? 0) + Number(n));
    });
    result.refused += (chunk.length - Number(fit)) * endpointIds.length;
  }
  if (result.buffered > 0) await registerWorld(redis, keyPrefix, worldId);
  return result;
}

// KEYS: buffer, dropped, pending, inflight, bytes. ARGV: count, endpointId, deliveryId.
// Returns {deliveryId, events as a JSON array text, event count, dropped since last claim, 1 if held over}.
// The buffered texts are JSON objects, so joining them with commas inside brackets is their array.
// The batch's bytes move from the buffer's counter to the in-flight record (a counter never goes
// below 0: buffers filled before it existed had none).
const CLAIM_SCRIPT = `
local dropped = tonumber(redis.call('GET', KEYS[2]) or '0')
if dropped > 0 then redis.call('DEL', KEYS[2]) end
local held = redis.call('HMGET', KEYS[4], 'id', 'events', 'n')
if held[1] then
  return {held[1], held[2], tonumber(held[3]), dropped, 1}
end
local events = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
if not events then
  redis.call('SREM', KEYS[3], ARGV[2])
  redis.call('DEL', KEYS[5])
  return {ARGV[3], '[]', 0, dropped, 0}
end
local size = 0
for _, v in ipairs(events) do size = size + string.len(v) end
if redis.call('DECRBY', KEYS[5], size) < 0 or redis.call('LLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[5]) end
local text = '[' .. table.concat(events, ',') .. ']'
redis.call('HSET', KEYS[4], 'id', ARGV[3], 'events', text, 'n', #events, 'b', size)
return {ARGV[3], text, #events, dropped, 0}`;

// KEYS: buffer, pending, inflight. ARGV: endpointId, deliveryId. Returns the events left in the buffer.
const RELEASE_SCRIPT = `
if redis.call('HGET', KEYS[3], 'id') == ARGV[2] then redis.call('DEL', KEYS[3]) end
local left = redis.call('LLEN', KEYS[1])
if left == 0 and redis.call('EXISTS', KEYS[3]) == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end
return left`;

/** One batch claimed from an endpoint's buffer (see {@link claimAnalyticsBatch}). */
export interface AnalyticsClaim {
  /** The batch's deliveryId: the one proposed, or that of the held-over batch. */
  deliveryId: string;
  /** The inner events as one JSON array text, oldest first (`[]` when there was nothing). */
  eventsJson: string;
  /** Inner events in the batch (0: nothing to send; the endpoint was unregistered). */
  count: number;
  /** Events trimmed from the full buffer since the previous claim (the counter is reset). */
  dropped: number;
  /** True when this is a batch claimed by an earlier flush that did not complete (its row may exist). */
  heldOver: boolean;
}

/**
 * Atomically claims the endpoint's next batch and collects its dropped counter. When a batch
 * claimed earlier was never released, that batch is returned again, unchanged, with its own
 * deliveryId; otherwise up to `count` events move from the buffer into the in-flight record under
 * `deliveryId`. An endpoint with nothing at all is unregistered.
 */
export async function claimAnalyticsBatch(redis: RedisClient, keyPrefix: string, worldId: string, endpointId: string, count: number, deliveryId: string): Promise<AnalyticsClaim> {
  const keys = analyticsKeys(keyPrefix, worldId);
  const [id, eventsJson, n, dropped, heldOver] = (await redis.eval(
    CLAIM_SCRIPT,
    5,
    keys.buffer(endpointId),
    keys.dropped(endpointId),
    keys.pending,
    keys.inflight(endpointId),
    keys.bytes(endpointId),
    String(count),
    endpointId,
    deliveryId,
  )) as [string, string, number, number, number];
  return { deliveryId: id, eventsJson, count: Number(n), dropped: Number(dropped), heldOver: Number(heldOver) === 1 };
}

/**
 * Forgets the in-flight batch `deliveryId` of the endpoint, once its delivery row is committed and
 * its job queued (a record since replaced by another claim is left alone), and unregisters the
 * endpoint when nothing is left. Resolves with the events still buffered.
 */
export async function releaseAnalyticsBatch(redis: RedisClient, keyPrefix: string, worldId: string, endpointId: string, deliveryId: string): Promise<number> {
  const keys = analyticsKeys(keyPrefix, worldId);
  const left = await redis.eval(RELEASE_SCRIPT, 3, keys.buffer(endpointId), keys.pending, keys.inflight(endpointId), endpointId, deliveryId);
  return Number(left);
}

// KEYS: buffer, dropped, pending, inflight, bytes. ARGV: endpointId. Returns {events discarded, dropped since last claim}.
const DISCARD_SCRIPT = `
local n = redis.call('LLEN', KEYS[1]) + tonumber(redis.call('HGET', KEYS[4], 'n') or '0')
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5])
redis.call('SREM', KEYS[3], ARGV[1])
local dropped = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('DEL', KEYS[2])
return {n, dropped}`;

/**
 * Empties the buffer and the in-flight batch of an endpoint that can no longer receive analytics
 * (deleted, disabled, unsubscribed) and unregisters it; resolves with the events discarded and the
 * dropped counter collected, so both are counted.
 */
export async function discardAnalyticsBuffer(redis: RedisClient, keyPrefix: string, worldId: string, endpointId: string): Promise<{ discarded: number; dropped: number }> {
  const keys = analyticsKeys(keyPrefix, worldId);
  const [discarded, dropped] = (await redis.eval(DISCARD_SCRIPT, 5, keys.buffer(endpointId), keys.dropped(endpointId), keys.pending, keys.inflight(endpointId), keys.bytes(endpointId), endpointId)) as [number, number];
  return { discarded: Number(discarded), dropped: Number(dropped) };
}

/** An endpoint whose buffer or in-flight batch may hold events, with its world (the keys' hash tag). */
export interface PendingAnalyticsEndpoint {
  worldId: string;
  endpointId: string;
}

/**
 * Endpoints whose buffer or in-flight batch may hold events, world by world. A registered world
 * whose pending set is empty is unregistered, then looked at again: a push that registered it
 * meanwhile (its script ran first) puts it back.
 */
export async function pendingAnalyticsEndpoints(redis: RedisClient, keyPrefix: string): Promise<PendingAnalyticsEndpoint[]> {
  const worldsKey = analyticsWorldsKey(keyPrefix);
  const pending: PendingAnalyticsEndpoint[] = [];
  for (const worldId of await redis.smembers(worldsKey)) {
    const pendingKey = analyticsKeys(keyPrefix, worldId).pending;
    const endpointIds = await redis.smembers(pendingKey);
    if (endpointIds.length === 0) {
      await redis.srem(worldsKey, worldId);
      if ((await redis.scard(pendingKey)) > 0) await redis.sadd(worldsKey, worldId);
      continue;
    }
    for (const endpointId of endpointIds) pending.push({ worldId, endpointId });
  }
  return pending;
}
