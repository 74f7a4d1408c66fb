/**
 * Redis as a dispatch index rebuilt from PostgreSQL (the schedule of record): which delivery runs
 * have a job, the marker that tells a Redis that lost its data from one that did not, and the lease
 * that keeps the reconciler on one worker replica at a time. The reconciler itself is the delivery
 * worker's; these are the Redis operations it needs, next to the queue whose keys they read.
 */
import { randomUUID } from "node:crypto";
import type { Queue } from "bullmq";
import type { RedisClient } from "./redis-connection.js";
import { deliverJobId } from "./producer.js";

/**
 * The marker of a deliveries queue's index: set once every pending delivery had its job, in the
 * queue's own key space, so whatever removes the queue's keys (a Redis restarted empty, a failover
 * to a replica that never had them, a FLUSHDB, an eviction) removes the marker with them.
 */
export function indexMarkerKey(queue: Queue): string {
  return `${queue.qualifiedName}:sched:indexed`;
}

/** The state of the index as its marker says. */
export type IndexState = "indexed" | "rebuilding" | "missing";

/** Reads the queue's index marker. */
export async function indexState(redis: RedisClient, queue: Queue): Promise<IndexState> {
  const value = await redis.get(indexMarkerKey(queue));
  return value === null ? "missing" : value.startsWith("rebuilding") ? "rebuilding" : "indexed";
}

/** Marks a rebuild as started (the marker exists from now on, so its disappearance is seen). */
export async function markRebuilding(redis: RedisClient, queue: Queue): Promise<string> {
  const epoch = `rebuilding:${randomUUID()}`;
  await redis.set(indexMarkerKey(queue), epoch);
  return epoch;
}

/**
 * Marks the rebuild `epoch` complete. False when the marker is no longer that epoch's: the data was
 * lost again during the rebuild (the marker went with it), so the rebuild must start over.
 */
export async function markIndexed(redis: RedisClient, queue: Queue, epoch: string): Promise<boolean> {
  const done = await redis.eval(
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0",
    1,
    indexMarkerKey(queue),
    epoch,
    `indexed:${epoch.slice("rebuilding:".length)}`,
  );
  return Number(done) === 1;
}

// KEYS: the queue's failed set, then one job hash key per run. Returns per run: 0 a job exists,
// 1 no job, 2 a failed job (it must be removed before the run can be queued again).
const JOBS_STATE_LUA = `
local out = {}
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    out[#out + 1] = 1
  elseif redis.call('ZSCORE', KEYS[1], ARGV[i - 1]) then
    out[#out + 1] = 2
  else
    out[#out + 1] = 0
  end
end
return out`;

/**
 * Which of the runs have no live job in the queue: none at all, or only a failed one (BullMQ's
 * failed set; such a job is removed here, so the run can be queued again under its id). One round
 * trip for the batch, plus one per failed job.
 */
export async function runsWithoutJob(redis: RedisClient, queue: Queue, runs: readonly { deliveryId: string; run: number }[]): Promise<boolean[]> {
  if (runs.length === 0) return [];
  const ids = runs.map((r) => deliverJobId(r));
  const states = (await redis.eval(JOBS_STATE_LUA, ids.length + 1, queue.toKey("failed"), ...ids.map((id) => queue.toKey(id)), ...ids)) as number[];
  const missing: boolean[] = [];
  for (const [i, state] of states.entries()) {
    if (Number(state) === 2) await queue.remove(ids[i] as string);
    missing.push(Number(state) !== 0);
  }
  return missing;
}

/**
 * A lease on one key: held by one holder at a time, renewed by its holder, lost when not renewed
 * within its time to live (a holder that died), so another takes over.
 */
export class RedisLease {
  private readonly token = randomUUID();

  constructor(
    private readonly redis: RedisClient,
    readonly key: string,
    private readonly ttlMs: number,
  ) {}

  /** Takes the lease if free, renews it if ours; true while ours. */
  async hold(): Promise<boolean> {
    const held = await this.redis.eval(
      "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end " +
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0",
      1,
      this.key,
      this.token,
      String(this.ttlMs),
    );
    return Number(held) === 1;
  }

  /** Gives the lease up if ours (shutdown), so another holder need not wait for it to expire. */
  async release(): Promise<void> {
    await this.redis.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, this.key, this.token);
  }
}
