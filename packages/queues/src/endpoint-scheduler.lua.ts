/**
 * The Lua side of {@link EndpointScheduler} (`endpoint-scheduler.ts`): every decision about an
 * endpoint's slots is one script, so two worker replicas (or a producer and a worker) never see
 * half of another's change. Times come from Redis (`TIME`), not from the callers, so replicas on
 * hosts with skewed clocks agree on when a lease expires and when the next throttled start is due.
 *
 * Per endpoint (`<base>ep:<endpointId>`):
 * - the hash: `win` (the window of concurrent attempts, adapted like TCP congestion control),
 *   `rate` (rateLimitPerSecond as last read from the endpoint row, absent for none), `tat` (the
 *   throttle's theoretical arrival time in ms: the earliest start of the next attempt);
 * - `:leases`, a sorted set of the slots in use, scored by expiry: `<jobId>:<token>` for an attempt
 *   in flight, `r:<jobId>` for a slot handed to a parked job that was just promoted to the wait list;
 * - `:parked`, a sorted set of the ids of jobs waiting for a slot (kept in BullMQ's delayed set
 *   meanwhile), scored by park time in microseconds so the oldest goes first.
 * Every key of a shard's scheduler starts with its base, so they share the shard queue's hash tag
 * (delivery-shards.ts): one Redis Cluster slot. And `<base>backlogged`: endpoints with parked jobs, scored by their oldest park time (µs); and
 * `<base>parking`, the park intents: `<endpointId>/<jobId>` of jobs about to be moved to the delayed
 * set and parked, scored by when (ms), removed by the park itself (see `EndpointScheduler.sweep`).
 */

/**
 * Window of an endpoint not seen yet (or whose state was forgotten), capped by the largest window
 * (DELIVERY_ENDPOINT_CONCURRENCY). It opens wide, like TCP's initial window of 10 (RFC 6928), and
 * is narrowed by what the endpoint does: a timeout or connection error takes it to the slow window
 * (2), a 429 or 503 halves it. A window that opened at 2 and grew by one per answer parked most of
 * a burst's first jobs, and jobs parked during a burst wait for their promotion behind the whole
 * wait list: `pnpm bench delivery` lost a large share of its throughput to that.
 */
export const INITIAL_WINDOW = 10;
/**
 * An endpoint's hash expires a day after its window was recorded or last changed (then the window
 * restarts at {@link INITIAL_WINDOW} and the rate is read again from the row). The leases set needs
 * no expiry: releases empty it, and Redis deletes an empty set.
 */
export const ENDPOINT_STATE_TTL_MS = 86_400_000;

const COMMON = `
local rcall = redis.call
local function nowMs()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Drops expired leases; a reservation that expired unclaimed means its promotion was lost (a
-- crash between hand-off and promote): its job id is returned to be promoted again. Returns how
-- many leases it dropped.
local function purge(leases, now, out)
  local expired = rcall('ZRANGEBYSCORE', leases, '-inf', now)
  if #expired > 0 then
    rcall('ZREMRANGEBYSCORE', leases, '-inf', now)
    for _, m in ipairs(expired) do
      if string.sub(m, 1, 2) == 'r:' then out[#out + 1] = string.sub(m, 3) end
    end
  end
  return #expired
end
-- The recorded window. Unrecorded (an endpoint whose state expired while jobs stay parked), one
-- slot is handed on at a time until the next acquire records it: callers of handoff (producers,
-- the sweep) do not know the largest window, so a guess could exceed it.
local function windowOf(ep)
  return tonumber(rcall('HGET', ep, 'win')) or 1
end
-- Gives the free slots to the oldest parked jobs as reservations, and keeps the backlog index
-- right when the parked set changed. win: the recorded window, when the caller has just read it.
local function handoff(ep, leases, parked, backlogged, epId, now, ttl, touched, out, win)
  local free = (win or windowOf(ep)) - rcall('ZCARD', leases)
  while free > 0 do
    local head = rcall('ZPOPMIN', parked)
    if #head == 0 then break end
    rcall('ZADD', leases, now + ttl, 'r:' .. head[1])
    out[#out + 1] = head[1]
    free = free - 1
    touched = true
  end
  if touched then
    local first = rcall('ZRANGE', parked, 0, 0, 'WITHSCORES')
    if #first == 0 then rcall('ZREM', backlogged, epId) else rcall('ZADD', backlogged, first[2], epId) end
  end
end
`;

/**
 * One acquire: takes a slot for the run `member` of job `jobId`, or refuses. Returns `{granted 0|1,
 * waitMs, rate, backlogged 0|1, ...job ids to promote}`. A job holding a reservation always gets its
 * slot; any other job gets one only if the window has room and no parked job is older (FIFO):
 * `backlogged` says a refusal was for parked jobs (the caller must queue behind them), not only a
 * full window. The throttle reserves the next start: the caller waits `waitMs`.
 *
 * One release: frees the slot of `member`, adapts the window to the signal (+1 per answer up to the
 * largest, back to the slow window on a timeout or connection error, halved on 429/503) and hands
 * free slots to parked jobs. Returns the job ids to promote.
 */
const SLOT_OPS = `
local function acquireOne(base, epId, member, jobId, fresh, ttl, maxw, now)
  local ep = base .. 'ep:' .. epId
  local leases, parked = ep .. ':leases', ep .. ':parked'
  local out = {}
  -- A reservation is only ever handed to a parked job: a fresh job (its first run, never
  -- delayed) cannot hold one, and skips the lookup.
  local reserved = fresh ~= '1' and rcall('ZREM', leases, 'r:' .. jobId) == 1
  local h = rcall('HMGET', ep, 'win', 'rate', 'tat')
  local recorded = tonumber(h[1])
  if not recorded then
    -- First sight (or forgotten): record the opening window, so hand-offs know it.
    recorded = math.min(${INITIAL_WINDOW}, maxw)
    rcall('HSET', ep, 'win', recorded)
    rcall('PEXPIRE', ep, ${ENDPOINT_STATE_TTL_MS})
  end
  local win = math.min(recorded, maxw)
  if not reserved then
    local backlogged = rcall('EXISTS', parked)
    local refused = backlogged == 1
    if refused then
      purge(leases, now, out)
    elseif rcall('ZCARD', leases) >= win then
      -- Expired leases (a dead worker's slots) only matter when they fill the window: dropped
      -- here, and the rest counted again.
      refused = purge(leases, now, out) == 0 or rcall('ZCARD', leases) >= win
    end
    if refused then
      if backlogged == 1 then handoff(ep, leases, parked, base .. 'backlogged', epId, now, ttl, false, out, recorded) end
      return {0, 0, 0, backlogged, unpack(out)}
    end
  end
  local wait = 0
  local rate = tonumber(h[2]) or 0
  if rate > 0 then
    local tat = math.max(tonumber(h[3]) or now, now)
    wait = tat - now
    rcall('HSET', ep, 'tat', tat + 1000 / rate)
  end
  rcall('ZADD', leases, now + wait + ttl, member)
  return {1, math.floor(wait), rate, 0, unpack(out)}
end
local function releaseOne(base, epId, member, jobId, signal, ttl, maxw, sloww, now)
  local ep = base .. 'ep:' .. epId
  local leases, parked = ep .. ':leases', ep .. ':parked'
  local out = {}
  rcall('ZREM', leases, member)
  -- A job parked once and then run anyway (its park timeout) leaves the parked set now; so does a
  -- fresh one whose id a producer parked while the job itself already waited or ran (a re-enqueue
  -- of the same delivery, ignored by BullMQ, for an endpoint with a backlog by then).
  local touched = rcall('ZREM', parked, jobId) == 1
  purge(leases, now, out)
  local old = tonumber(rcall('HGET', ep, 'win'))
  local win = math.min(old or ${INITIAL_WINDOW}, maxw)
  if signal == 'answered' then win = math.min(maxw, win + 1)
  elseif signal == 'unresponsive' then win = math.min(maxw, sloww)
  elseif signal == 'throttled' then win = math.max(1, math.floor(win / 2)) end
  if win ~= old then
    rcall('HSET', ep, 'win', win)
    rcall('PEXPIRE', ep, ${ENDPOINT_STATE_TTL_MS})
  end
  -- The freed slot goes to a parked job, if any (the window recorded is win by now).
  if touched or rcall('EXISTS', parked) == 1 then
    handoff(ep, leases, parked, base .. 'backlogged', epId, now, ttl, touched, out, win)
  end
  return out
end
`;

/**
 * KEYS: the backlog index, only to route the call (like the sweep, it names endpoints' keys from
 * the base, all under the shard's hash tag). ARGV: base, lease ttl ms,
 * largest window, slow window, then operations of six fields each: `a` (acquire) or `r`
 * (release), endpointId, lease member, jobId, signal (empty for an acquire), and for an acquire
 * `1` when the job is fresh (its first run, never delayed: it holds no reservation). Runs them in order,
 * as one atomic step, and returns one reply per operation (see SLOT_OPS). The worker sends the
 * acquires and releases of one event-loop turn together: jobs whose log writes commit in one batch
 * finish together, and their next jobs arrive together, so one round trip serves many of them
 * instead of one each (two per delivery were a tenth of the worker's CPU).
 */
export const SLOTS_LUA = `${COMMON}${SLOT_OPS}
local base = ARGV[1]
local ttl, maxw, sloww = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = nowMs()
local res = {}
for i = 5, #ARGV, 6 do
  if ARGV[i] == 'a' then
    res[#res + 1] = acquireOne(base, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 5], ttl, maxw, now)
  else
    res[#res + 1] = releaseOne(base, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ttl, maxw, sloww, now)
  end
end
return res
`;

/**
 * KEYS: hash, leases, parked, backlogged, park intents. ARGV: endpointId, reservation ttl ms,
 * jobIds... Parks the jobs (a job parked again keeps its first place: NX) and drops their intents
 * (`<endpointId>/<jobId>`), then hands any free slot to the oldest parked job. Returns the job ids
 * to promote (possibly the ones just parked).
 */
export const PARK_LUA = `${COMMON}
local now = nowMs()
local out = {}
purge(KEYS[2], now, out)
for i = 3, #ARGV do
  rcall('ZADD', KEYS[3], 'NX', now * 1000 + i, ARGV[i])
  rcall('ZREM', KEYS[5], ARGV[1] .. '/' .. ARGV[i])
end
handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], now, tonumber(ARGV[2]), true, out)
return out
`;

/**
 * KEYS: hash, leases. ARGV: lease member, rate (0 = none), lease ttl ms. Records the endpoint's
 * rate as just read from its row and, for a rate, reserves this attempt's start (extending its
 * lease by the wait). Returns the wait in ms.
 */
export const THROTTLE_LUA = `${COMMON}
local now = nowMs()
local rate = tonumber(ARGV[2])
if rate == 0 then
  rcall('HDEL', KEYS[1], 'rate', 'tat')
  return 0
end
rcall('HSET', KEYS[1], 'rate', rate)
local tat = math.max(tonumber(rcall('HGET', KEYS[1], 'tat')) or now, now)
rcall('HSET', KEYS[1], 'tat', tat + 1000 / rate)
rcall('ZADD', KEYS[2], 'XX', now + (tat - now) + tonumber(ARGV[3]), ARGV[1])
return math.floor(tat - now)
`;

/**
 * KEYS: the backlog index, to route the call (it visits endpoints found there). ARGV: base, reservation ttl ms, how
 * many endpoints. For each backlogged endpoint, oldest first: drop expired leases (a dead
 * worker's slots come back) and hand free slots to parked jobs. Returns endpointId, jobId pairs.
 */
export const SWEEP_LUA = `${COMMON}
local base = ARGV[1]
local now = nowMs()
local pairs_out = {}
for _, epId in ipairs(rcall('ZRANGE', base .. 'backlogged', 0, tonumber(ARGV[3]) - 1)) do
  local ep = base .. 'ep:' .. epId
  local out = {}
  purge(ep .. ':leases', now, out)
  handoff(ep, ep .. ':leases', ep .. ':parked', base .. 'backlogged', epId, now, tonumber(ARGV[2]), true, out)
  for _, id in ipairs(out) do
    pairs_out[#pairs_out + 1] = epId
    pairs_out[#pairs_out + 1] = id
  end
end
return pairs_out
`;

/**
 * KEYS: the backlog index, to route the call. ARGV: base, endpointIds... Returns 1 per endpoint that has jobs parked: a producer
 * queues its new jobs straight into the parked set, behind them. (An endpoint merely at its
 * window is not enough: a fast one frees a slot within milliseconds, and parking every job of a
 * busy healthy endpoint would double its cost.)
 */
export const ROUTE_LUA = `
local base = ARGV[1]
local res = {}
for i = 2, #ARGV do
  res[#res + 1] = redis.call('EXISTS', base .. 'ep:' .. ARGV[i] .. ':parked')
end
return res
`;

/**
 * KEYS: the backlog index, to route the call. ARGV: base, how many endpoints to sum. Returns {backlogged endpoints, oldest park score
 * (µs, 0 if none), parked jobs summed over the first endpoints, now ms}.
 */
export const STATS_LUA = `${COMMON}
local base = ARGV[1]
local idx = base .. 'backlogged'
local n = rcall('ZCARD', idx)
local first = rcall('ZRANGE', idx, 0, 0, 'WITHSCORES')
local total = 0
for _, epId in ipairs(rcall('ZRANGE', idx, 0, tonumber(ARGV[2]) - 1)) do
  total = total + rcall('ZCARD', base .. 'ep:' .. epId .. ':parked')
end
return {n, first[2] or '0', total, nowMs()}
`;
