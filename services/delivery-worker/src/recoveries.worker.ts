/**
 * The BullMQ worker of the recoveries queue: validates each `recover.v1` payload and runs
 * {@link runRecovery}. Infrastructure failures retry with the infra backoff (the run resumes from
 * its cursor); when the last attempt fails, the recovery is marked `failed` with the reason.
 */
import { UnrecoverableError, Worker } from "bullmq";
import type { RedisClient } from "@vw/queues";
import {
  JOB_NAMES,
  QUEUE_NAMES,
  queuePrefix,
  validateRecoverJob,
  INFRA_BACKOFF_SETTINGS,
  WORKER_RUN_RETRY_DELAY_MS,
  jobPayload,
} from "@vw/queues";
import { redisClientErrorListener, withJobSpan } from "@vw/service-kit";
import { runRecovery, type RecoverDeps } from "./recover.js";

/** Starts the recoveries worker (two recoveries at a time per replica; each is sequential batches). */
export function createRecoveriesWorker(options: {
  connection: RedisClient;
  keyPrefix: string;
  deps: RecoverDeps;
  /** The queue's BullMQ prefix; `queuePrefix` of the queue's name unless given. */
  prefix?: string;
}): Worker {
  const { deps } = options;
  const worker = new Worker(
    QUEUE_NAMES.recoveries,
    // With tracing on, each job's run is a span continuing the trace of whoever added it.
    (job) =>
      withJobSpan(job, async () => {
        if (job.name !== JOB_NAMES.recover) throw new UnrecoverableError(`unknown job name ${job.name} on ${QUEUE_NAMES.recoveries}`);
        return runRecovery(deps, jobPayload(JOB_NAMES.recover, validateRecoverJob, job.data).recoveryId);
      }),
    {
      connection: options.connection,
      prefix: options.prefix ?? queuePrefix(options.keyPrefix, QUEUE_NAMES.recoveries),
      concurrency: 2,
      settings: INFRA_BACKOFF_SETTINGS,
      runRetryDelay: WORKER_RUN_RETRY_DELAY_MS,
    },
  );
  worker.on("failed", (job, err: Error) => {
    deps.logger.error({ jobId: job?.id, attemptsMade: job?.attemptsMade, err }, "recover job failed");
    const finalAttempt = job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1);
    if (finalAttempt && typeof job.data?.recoveryId === "string") {
      deps.recoveries
        .finish(job.data.recoveryId, "failed", `The recover job failed: ${err.message}`)
        .catch((e: unknown) => deps.logger.error({ err: e, jobId: job.id }, "could not mark the recovery failed"));
    }
  });
  worker.on("error", redisClientErrorListener(deps.logger, "recoveries worker error"));
  return worker;
}
