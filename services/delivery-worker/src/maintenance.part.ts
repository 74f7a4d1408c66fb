/**
 * The retention part: the delivery log's partitions ahead, ensured at start-up, and the
 * maintenance queue's schedule and worker, which creates them ahead and drops the expired ones
 * every RETENTION_INTERVAL_MS (maintenance.worker.ts, retention.ts).
 */
import { LogPartitions, type PgPool } from "@vw/db";
import { QUEUE_NAMES, openQueue, type RedisClient } from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import { createMaintenanceWorker, scheduleRetention } from "./maintenance.worker.js";
import type { WorkerMetrics } from "./metrics.js";
import { queuePart, type QueuePart } from "./queue-worker.part.js";

/** Starts the retention part. */
export async function startMaintenance(options: {
  connection: RedisClient;
  keyPrefix: string;
  pool: PgPool;
  retentionDays: number;
  partitionsAheadDays: number;
  retentionIntervalMs: number;
  metrics: WorkerMetrics;
  logger: Logger;
  /** Bound of the wait for a run in flight at close. */
  jobBoundMs: number;
}): Promise<QueuePart> {
  const { logger } = options;
  // Partitions ahead at start-up too, so a fresh replica never waits for the first scheduled run;
  // a failure is logged and left to that run (there are days of margin, and deliveries go on).
  await new LogPartitions(options.pool).ensureAhead(options.partitionsAheadDays).catch((err: unknown) => {
    logger.error({ err }, "delivery log: partitions ahead not ensured at start-up (the retention job retries)");
  });
  const queue = openQueue(QUEUE_NAMES.maintenance, options.connection, options.keyPrefix);
  queue.on("error", redisClientErrorListener(logger, "queue error"));
  try {
    await scheduleRetention(queue, options.retentionIntervalMs);
  } catch (err) {
    await queue.close().catch(() => undefined);
    throw err;
  }
  const worker = createMaintenanceWorker({
    connection: options.connection,
    keyPrefix: options.keyPrefix,
    pool: options.pool,
    retentionDays: options.retentionDays,
    partitionsAheadDays: options.partitionsAheadDays,
    metrics: options.metrics,
    logger,
  });
  return queuePart({ name: "retention", queue, worker, jobBoundMs: options.jobBoundMs, logger });
}
