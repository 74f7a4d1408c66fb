/**
 * The BullMQ worker of the maintenance queue and its schedule: `retention.v1` (partitions ahead,
 * expired partitions dropped: retention.ts) every RETENTION_INTERVAL_MS. The schedule is upserted by every worker replica at start-up; BullMQ's job
 * scheduler keeps a single one, so replicas never run it twice for the same slot.
 */
import { Queue, UnrecoverableError, Worker } from "bullmq";
import type { RedisClient } from "@vw/queues";
import type { PgPool } from "@vw/db";
import { JOB_NAMES, QUEUE_NAMES, WORKER_RUN_RETRY_DELAY_MS, assertPayload, queuePrefix, validateRetentionJob } from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import type { WorkerMetrics } from "./metrics.js";
import { runRetention } from "./retention.js";

/** Id of the retention schedule in the maintenance queue. */
export const RETENTION_SCHEDULER_ID = "delivery-retention";

/** Upserts the retention schedule. */
export async function scheduleRetention(queue: Queue, everyMs: number): Promise<void> {
  await queue.upsertJobScheduler(RETENTION_SCHEDULER_ID, { every: everyMs }, { name: JOB_NAMES.retention, data: {} });
}

/** Starts the maintenance worker. */
export function createMaintenanceWorker(options: {
  connection: RedisClient;
  keyPrefix: string;
  pool: PgPool;
  retentionDays: number;
  partitionsAheadDays: number;
  metrics: WorkerMetrics;
  logger: Logger;
}): Worker {
  const worker = new Worker(
    QUEUE_NAMES.maintenance,
    async (job) => {
      if (job.name !== JOB_NAMES.retention) throw new UnrecoverableError(`unknown job name ${job.name}`);
      assertPayload(JOB_NAMES.retention, validateRetentionJob, job.data);
      try {
        const result = await runRetention(options.pool, { retentionDays: options.retentionDays, partitionsAheadDays: options.partitionsAheadDays });
        options.metrics.observeRetention(result);
        options.logger.info(
          {
            partitionsCreated: result.partitionsCreated,
            partitionsDropped: result.dropped.length,
            dropped: result.dropped.map((d) => `${d.partition} (detach ${d.detachMs} ms, drop ${d.dropMs} ms)`),
            durationMs: result.durationMs,
          },
          "retention: delivery log partitions maintained",
        );
        return { partitionsCreated: result.partitionsCreated, dropped: result.dropped.map((d) => d.partition) };
      } catch (err) {
        options.metrics.retentionFailures.inc();
        throw err;
      }
    },
    { connection: options.connection, prefix: queuePrefix(options.keyPrefix, QUEUE_NAMES.maintenance), concurrency: 1, runRetryDelay: WORKER_RUN_RETRY_DELAY_MS },
  );
  worker.on("failed", (job, err) => options.logger.error({ jobId: job?.id, err }, "maintenance job failed"));
  worker.on("error", redisClientErrorListener(options.logger, "maintenance worker error"));
  return worker;
}
