/**
 * Jobs left in the key layout of the versions before hash tags: one untagged BullMQ queue each,
 * `<REDIS_KEY_PREFIX>:bull:<queue>:…` (today's keys are `<REDIS_KEY_PREFIX>:bull:{<tag>}:<queue>:…`).
 * An upgrade from that layout starts every queue on new keys, so what was still queued under the
 * old ones is not seen by today's workers:
 * - deliveries (`webhook-deliveries`) come back without them: the new shards' index markers are
 *   missing, and the reconciler rebuilds them from PostgreSQL, the schedule of record;
 * - the maintenance and analytics queues hold only their schedulers' runs, which today's workers
 *   schedule again on the new keys (a run skipped is made up by the next one);
 * - notifications (an endpoint-disabled mail) and recoveries (a `recover.v1`) exist nowhere else:
 *   those are run here, from the old keys, by a BullMQ worker of their queue on the old prefix,
 *   with the same processor as today's. BullMQ takes each job once (its lock), whichever process
 *   or version runs it, so every worker replica may do this at the same time, and old workers still
 *   running during the rollout too.
 *
 * Each sweep of the worker looks for jobs there (an EXISTS on the queue's lists and sets: Redis
 * deletes an empty one) and starts such a worker while there are, then closes it once they are gone.
 * A Redis Cluster never held that layout (it came with the hash tags), and its keys would span
 * slots: nothing is looked for there.
 */
import type { Worker } from "bullmq";
import { QUEUE_NAMES, bullPrefix, type RedisClient } from "@vw/queues";

/** The queues whose jobs exist only in Redis, so are run from the old layout (see the file comment). */
export const LEGACY_RUN_QUEUES = [QUEUE_NAMES.notifications, QUEUE_NAMES.recoveries] as const;
export type LegacyRunQueue = (typeof LEGACY_RUN_QUEUES)[number];

/** The BullMQ prefix of the layout without hash tags (every queue's keys were `<this>:<queue>:…`). */
export function legacyPrefix(keyPrefix: string): string {
  return bullPrefix(keyPrefix);
}

/** The keys of an untagged queue that hold jobs still to run (absent when empty). */
function pendingKeys(keyPrefix: string, queue: string): string[] {
  const base = `${legacyPrefix(keyPrefix)}:${queue}`;
  return ["wait", "paused", "delayed", "prioritized", "active", "waiting-children"].map((k) => `${base}:${k}`);
}

/** Whether the old layout's queue still holds a job to run (false on a Cluster, which never held it). */
export async function legacyQueueHoldsJobs(redis: RedisClient, keyPrefix: string, queue: string): Promise<boolean> {
  if (redis.isCluster) return false;
  return (await redis.exists(...pendingKeys(keyPrefix, queue))) > 0;
}

/**
 * Runs the old layout's jobs of {@link LEGACY_RUN_QUEUES} while there are any: `sweep` (called on
 * the worker's sweep interval) starts a worker of a queue found holding jobs and closes it once
 * the queue is empty.
 */
export class LegacyQueues {
  private readonly running = new Map<LegacyRunQueue, Worker>();
  private closed = false;

  constructor(
    private readonly options: {
      redis: RedisClient;
      keyPrefix: string;
      /** A worker of the queue on the given BullMQ prefix, with today's processor. */
      startWorker: (queue: LegacyRunQueue, prefix: string) => Worker;
      onStarted?: (queue: LegacyRunQueue) => void;
      onDrained?: (queue: LegacyRunQueue) => void;
    },
  ) {}

  /** The workers running now (old-layout queues with jobs). */
  get workers(): Worker[] {
    return [...this.running.values()];
  }

  /** One look at each queue of the old layout. */
  async sweep(): Promise<void> {
    if (this.options.redis.isCluster) return;
    for (const queue of LEGACY_RUN_QUEUES) {
      const holds = await legacyQueueHoldsJobs(this.options.redis, this.options.keyPrefix, queue);
      if (this.closed) return;
      const worker = this.running.get(queue);
      if (holds && !worker) {
        this.running.set(queue, this.options.startWorker(queue, legacyPrefix(this.options.keyPrefix)));
        this.options.onStarted?.(queue);
      } else if (!holds && worker) {
        this.running.delete(queue);
        await worker.close();
        this.options.onDrained?.(queue);
      }
    }
  }

  /** Closes the workers still running; none is started afterwards. */
  async close(): Promise<void> {
    this.closed = true;
    const workers = this.workers;
    this.running.clear();
    await Promise.all(workers.map((w) => w.close()));
  }
}
