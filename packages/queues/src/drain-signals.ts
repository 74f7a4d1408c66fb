/**
 * How deliveries get a worker: endpoint drains. PostgreSQL holds every delivery and when it is due
 * (the schedule of record); Redis only says which endpoints have work, as BullMQ jobs of the
 * deliveries queue, in the endpoint's shard (delivery-shards.ts):
 *
 * - the **drain job** `d-<endpointId>` (`drain.v1`): while it exists (waiting or running), a worker
 *   drains the endpoint: it claims the endpoint's due deliveries from PostgreSQL, a batch at a time,
 *   and sends them within the endpoint's window. One job id per endpoint, so one drain per endpoint
 *   at a time across every replica: the window and the throttle are the drain's own, shared by
 *   nobody, and cost Redis nothing per delivery;
 * - the **dirty flag** `…:vw:dirty:<endpointId>`: "new work since you last looked". Whoever makes
 *   work due (an intake's commit, a Replay, the analytics flush, the reconciler, a timer) calls
 *   {@link DrainSignals.wake}: one script per shard sets the flag of each endpoint and says which of
 *   them has no drain job, and only those get one (`addBulk`). A running drain consumes the flag
 *   before each claim, and claims again while it finds it set, so work made due while it runs is
 *   never left behind; a drain whose job is finishing when the flag is set is covered by
 *   {@link DrainSignals.afterDrain}, which adds the job again;
 * - **wakes of a lingering drain**: a drain that ran out of work lingers a little (the worker's
 *   DRAIN_LINGER_MS) before it ends, and the wake of an endpoint whose drain job exists is also
 *   published (`<prefix>:vw:wake`, the endpoints' ids): the lingering drain goes on at once,
 *   without a new job. An endpoint that gets an event every second costs one job per linger, not
 *   one per event. A lost message costs only the linger (the flag is still there);
 * - **timer jobs** `t-<endpointId>-<tick>` (delayed): a retry due later wakes its endpoint then.
 *   One per endpoint and {@link TIMER_TICK_MS} tick (never before the retry is due: rounded up), so
 *   a thousand retries due together cost a few jobs.
 *
 * Nothing here is needed for correctness: PostgreSQL's claims keep two drains of one endpoint (a
 * shard layout change, a lost job) from sending a delivery twice, and the reconciler wakes every
 * endpoint with due work after Redis lost its data (the index marker, below) and every
 * RECONCILE_INTERVAL_MS. Redis keeps only what makes it fast.
 */
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { JOB_NAMES } from "./catalogue.js";
import type { DeliveryQueues } from "./delivery-shards.js";
import type { RedisClient } from "./redis-connection.js";
import { writeTogetherThisTurn } from "./turn-writes.js";

/** How long a dirty flag outlives its last setting when no drain consumes it (an endpoint deleted meanwhile). */
const DIRTY_TTL_MS = 3_600_000;

/** Job id of an endpoint's drain. */
export const drainJobId = (endpointId: string): string => `d-${endpointId}`;
/** The resolution of retry timers: a retry is woken at most this much after it is due. */
export const TIMER_TICK_MS = 10;
/** Job id of the timer that wakes an endpoint at tick `tick` (Unix time in {@link TIMER_TICK_MS}). */
export const timerJobId = (endpointId: string, tick: number): string => `t-${endpointId}-${tick}`;
/** The endpoint a drain or timer job is for (its payload says so too). */
export function endpointOfJobId(jobId: string): string | null {
  if (jobId.startsWith("d-")) return jobId.slice(2);
  if (jobId.startsWith("t-")) return jobId.slice(2, 38);
  return null;
}

// KEYS: per endpoint, its dirty flag then its drain job's hash. ARGV: the flag's TTL (ms), the
// wake channel, then the endpoints' ids. Sets every flag; publishes the ids of the endpoints whose
// drain job exists (a drain lingering for more work wakes at once); returns the positions
// (1-based) of the endpoints without a drain job.
const WAKE_LUA = `
local out = {}
local running = {}
for i = 1, #KEYS, 2 do
  redis.call('SET', KEYS[i], '1', 'PX', ARGV[1])
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then
    out[#out + 1] = (i + 1) / 2
  else
    running[#running + 1] = ARGV[2 + (i + 1) / 2]
  end
end
if #running > 0 then redis.call('PUBLISH', ARGV[2], table.concat(running, ',')) end
return out`;

// KEYS: the dirty flag, the drain job's hash. Returns 1 when work was flagged and no drain job exists.
const ORPHANED_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
return 0`;

interface DrainCommands {
  vwWake(...args: (string | number)[]): Promise<number[]>;
  vwOrphaned(dirty: string, job: string): Promise<number>;
}

/** The drain signals of one layout of the deliveries queue (see the file comment). */
export class DrainSignals {
  private readonly channel: string;

  constructor(private readonly queues: DeliveryQueues) {
    this.channel = wakeChannel(queues.keyPrefix);
  }

  /**
   * Says that `endpointIds` have work due now: sets their flags and gives a drain job to those
   * without one. One script call per shard, the shards' calls in one write; then one `addBulk` per
   * shard that needs jobs. Resolves with how many drain jobs were added (endpoints that had none).
   */
  async wake(endpointIds: Iterable<string>): Promise<number> {
    const unique = [...new Set(endpointIds)];
    if (unique.length === 0) return 0;
    const groups = this.queues.byShard(unique.map((endpointId) => ({ endpointId })));
    let added = 0;
    await Promise.all(
      [...groups].map(async ([queue, group]) => {
        const client = await commandsOf(queue);
        writeTogetherThisTurn(client);
        const keys = group.flatMap(({ endpointId }) => [dirtyKey(queue, endpointId), queue.toKey(drainJobId(endpointId))]);
        const missing = await client.vwWake(keys.length, ...keys, DIRTY_TTL_MS, this.channel, ...group.map((g) => g.endpointId));
        if (missing.length === 0) return;
        added += missing.length;
        await queue.addBulk(
          missing.map((position) => {
            const endpointId = (group[Number(position) - 1] as { endpointId: string }).endpointId;
            return { name: JOB_NAMES.drain, data: { endpointId }, opts: { jobId: drainJobId(endpointId) } };
          }),
        );
      }),
    );
    return added;
  }

  /**
   * Wakes `endpointId` at `at` (a retry due then): a delayed timer job, one per endpoint and tick
   * (a tick already set costs nothing more).
   */
  async wakeAt(endpointId: string, at: Date): Promise<void> {
    const tick = Math.ceil(at.getTime() / TIMER_TICK_MS);
    const delay = Math.max(0, tick * TIMER_TICK_MS - Date.now());
    await this.queues.queueFor(endpointId).add(JOB_NAMES.drain, { endpointId }, { jobId: timerJobId(endpointId, tick), delay });
  }

  /**
   * Consumes the endpoint's flag: true when work was flagged since the last call. A drain calls it
   * before each claim, and stops only after a claim that came up short with the flag unset.
   */
  async takeFlag(endpointId: string): Promise<boolean> {
    const queue = this.queues.queueFor(endpointId);
    const client = (await queue.getBackend().client) as unknown as Redis;
    return (await client.getdel(dirtyKey(queue, endpointId))) !== null;
  }

  /**
   * After an endpoint's drain job finished: if work was flagged meanwhile while the job still
   * existed (its wake found the job and added none), the drain job is added again.
   */
  async afterDrain(endpointId: string): Promise<void> {
    const queue = this.queues.queueFor(endpointId);
    const client = await commandsOf(queue);
    if ((await client.vwOrphaned(dirtyKey(queue, endpointId), queue.toKey(drainJobId(endpointId)))) === 1) {
      await queue.add(JOB_NAMES.drain, { endpointId }, { jobId: drainJobId(endpointId) });
    }
  }

  /** The endpoint's window as its last drain left it (see the delivery worker's endpoint-window.ts), or null. */
  async loadWindow(endpointId: string): Promise<StoredWindow | null> {
    const queue = this.queues.queueFor(endpointId);
    const client = (await queue.getBackend().client) as unknown as Redis;
    const text = await client.get(windowKey(queue, endpointId));
    if (text === null) return null;
    try {
      return JSON.parse(text) as StoredWindow;
    } catch {
      return null;
    }
  }

  /** Hands an endpoint's window on to its next drain, and to the dashboard, for {@link WINDOW_TTL_MS}. */
  async saveWindow(endpointId: string, window: StoredWindow): Promise<void> {
    const queue = this.queues.queueFor(endpointId);
    const client = (await queue.getBackend().client) as unknown as Redis;
    await client.set(windowKey(queue, endpointId), JSON.stringify(window), "PX", WINDOW_TTL_MS);
  }
}

/** An endpoint's window of attempts in flight, as stored for its next drain and the dashboard. */
export interface StoredWindow {
  size: number;
  max: number;
  reason: "throttled" | "unresponsive" | null;
  /** When it last shrank (ms since the epoch). */
  since: number | null;
  ceiling: number | null;
}

/** How long a window is remembered after its last drain: past that, an endpoint starts afresh. */
export const WINDOW_TTL_MS = 600_000;

function windowKey(queue: Queue, endpointId: string): string {
  return `${queue.qualifiedName}:vw:win:${endpointId}`;
}

/** The channel a wake of an endpoint with a drain job is published on (one per deployment). */
export function wakeChannel(keyPrefix: string): string {
  return `${keyPrefix.replace(/:+$/, "")}:vw:wake`;
}

/** The dirty flag of an endpoint, in its shard's slot. */
function dirtyKey(queue: Queue, endpointId: string): string {
  return `${queue.qualifiedName}:vw:dirty:${endpointId}`;
}

/** The queue's connection with the drain scripts defined on it (once per connection). */
async function commandsOf(queue: Queue): Promise<RedisClient & DrainCommands> {
  const client = (await queue.getBackend().client) as unknown as Redis & Partial<DrainCommands>;
  if (typeof client.vwWake !== "function") {
    client.defineCommand("vwWake", { lua: WAKE_LUA });
    client.defineCommand("vwOrphaned", { numberOfKeys: 2, lua: ORPHANED_LUA });
  }
  return client as unknown as RedisClient & DrainCommands;
}

/**
 * The marker of a shard's dispatch index: set once every endpoint with due work was woken, in the
 * queue's own key space, so whatever removes the shard's keys (a Redis restarted empty, a failover
 * to a replica that never had them, a FLUSHDB, an eviction) removes the marker with them.
 */
export function indexMarkerKey(queue: Queue): string {
  return `${queue.qualifiedName}:vw:indexed`;
}
