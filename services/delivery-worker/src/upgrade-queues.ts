/**
 * The one-time step of an upgrade from one BullMQ job per delivery (`deliver.v1`, `deliver.v2`) to
 * endpoint drains (docs/decisions/0017): removes from the deliveries queue's shards every job that
 * is not a drain or a timer of today's layout, and clears the shards' index markers. The deliveries
 * those jobs stood for are in PostgreSQL (the migration moved every pending one into
 * `delivery_states`); with the markers gone, the first worker of the new version wakes every
 * endpoint with pending deliveries from there (reconciler.ts). The delivery path itself knows only
 * today's layout: a job of another name fails for good there (drains.worker.ts).
 *
 * Run it with every process of the earlier version stopped (a job an earlier worker still holds is
 * locked: it is counted, left, and the run fails, to be run again once that worker is gone).
 */
import { JOB_NAMES, indexMarkerKey, type DeliveryQueues, type RedisClient } from "@vw/queues";
import type { JobType } from "bullmq";

/** Every state a job of the earlier version may sit in. */
const STATES: JobType[] = ["wait", "prioritized", "delayed", "waiting-children", "active", "completed", "failed"];
const PAGE = 1000;

/** What {@link removeEarlierJobs} did. */
export interface UpgradeReport {
  shards: number;
  /** Jobs of the earlier version removed. */
  removed: number;
  /** Jobs of the earlier version left because a worker still holds them (not removable now). */
  locked: number;
  /** Index markers cleared (the reconciler's first check wakes every endpoint of their shards). */
  markersCleared: number;
}

/** Removes the earlier version's jobs from every shard of `queues` and clears their markers (see the file comment). */
export async function removeEarlierJobs(queues: DeliveryQueues, redis: RedisClient): Promise<UpgradeReport> {
  const report: UpgradeReport = { shards: queues.count, removed: 0, locked: 0, markersCleared: 0 };
  for (const queue of queues.shards) {
    const earlier: string[] = [];
    for (const state of STATES) {
      for (let start = 0; ; start += PAGE) {
        const jobs = await queue.getJobs([state], start, start + PAGE - 1);
        for (const job of jobs) if (job?.id !== undefined && job.name !== JOB_NAMES.drain) earlier.push(job.id);
        if (jobs.length < PAGE) break;
      }
    }
    for (const id of new Set(earlier)) {
      const removed = await queue.remove(id);
      if (removed === 1) report.removed += 1;
      else if ((await queue.getJob(id)) !== undefined) report.locked += 1;
    }
    report.markersCleared += await redis.del(indexMarkerKey(queue));
  }
  return report;
}
