/**
 * The analytics part: the analytics queue, and, when this process flushes (ANALYTICS_FLUSH_*
 * configured; tests that call `flushAnalytics` themselves run without), the flush's schedule and
 * worker (analytics.worker.ts, analytics-flush.ts).
 */
import { QUEUE_NAMES, openQueue, type RedisClient } from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import type { AnalyticsFlushDeps } from "./analytics-flush.js";
import { createAnalyticsWorker, scheduleAnalyticsFlush } from "./analytics.worker.js";
import { queuePart, type QueuePart } from "./queue-worker.part.js";

/** Starts the analytics part. */
export async function startAnalytics(options: {
  connection: RedisClient;
  keyPrefix: string;
  /** The flush's schedule and what it needs; null: no flush in this process. */
  flush: { intervalMs: number; deps: AnalyticsFlushDeps } | null;
  logger: Logger;
  /** Bound of the wait for a flush in flight at close. */
  jobBoundMs: number;
}): Promise<QueuePart> {
  const { logger } = options;
  const queue = openQueue(QUEUE_NAMES.analytics, options.connection, options.keyPrefix);
  queue.on("error", redisClientErrorListener(logger, "queue error"));
  if (options.flush === null) return queuePart({ name: "analytics", queue, worker: null, jobBoundMs: options.jobBoundMs, logger });
  try {
    await scheduleAnalyticsFlush(queue, options.flush.intervalMs);
  } catch (err) {
    await queue.close().catch(() => undefined);
    throw err;
  }
  const worker = createAnalyticsWorker({ keyPrefix: options.keyPrefix, deps: options.flush.deps });
  return queuePart({ name: "analytics", queue, worker, jobBoundMs: options.jobBoundMs, logger });
}
