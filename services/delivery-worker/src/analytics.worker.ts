/**
 * The BullMQ worker of the analytics queue and its schedule: `analytics-flush.v1` every
 * ANALYTICS_FLUSH_INTERVAL_MS. Every replica upserts the same scheduler at start-up and BullMQ
 * keeps a single one, so however many replicas run, there is one flush per interval, which is
 * what bounds the batches each endpoint receives.
 */
import { Queue, UnrecoverableError, Worker } from "bullmq";
import { JOB_NAMES, QUEUE_NAMES, WORKER_RUN_RETRY_DELAY_MS, assertPayload, queuePrefix, validateAnalyticsFlushJob } from "@vw/queues";
import { redisClientErrorListener } from "@vw/service-kit";
import { flushAnalytics, type AnalyticsFlushDeps } from "./analytics-flush.js";

/** Id of the flush schedule in the analytics queue. */
export const ANALYTICS_FLUSH_SCHEDULER_ID = "analytics-flush";

/** Upserts the flush schedule. */
export async function scheduleAnalyticsFlush(queue: Queue, everyMs: number): Promise<void> {
  await queue.upsertJobScheduler(ANALYTICS_FLUSH_SCHEDULER_ID, { every: everyMs }, { name: JOB_NAMES.analyticsFlush, data: {} });
}

/** Starts the analytics worker (one flush at a time per replica). */
export function createAnalyticsWorker(options: { keyPrefix: string; deps: AnalyticsFlushDeps }): Worker {
  const { deps } = options;
  const worker = new Worker(
    QUEUE_NAMES.analytics,
    async (job) => {
      if (job.name !== JOB_NAMES.analyticsFlush) throw new UnrecoverableError(`unknown job name ${job.name}`);
      assertPayload(JOB_NAMES.analyticsFlush, validateAnalyticsFlushJob, job.data);
      const flushed = await flushAnalytics(deps);
      if (flushed.deliveryIds.length > 0) deps.logger.debug({ batches: flushed.deliveryIds.length, events: flushed.events }, "analytics flushed");
      return { batches: flushed.deliveryIds.length, events: flushed.events, dropped: flushed.dropped };
    },
    { connection: deps.redis, prefix: queuePrefix(options.keyPrefix, QUEUE_NAMES.analytics), concurrency: 1, runRetryDelay: WORKER_RUN_RETRY_DELAY_MS },
  );
  worker.on("failed", (job, err) => deps.logger.error({ jobId: job?.id, err }, "analytics flush failed"));
  worker.on("error", redisClientErrorListener(deps.logger, "analytics worker error"));
  return worker;
}
