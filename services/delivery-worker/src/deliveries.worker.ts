/**
 * The BullMQ worker of the deliveries queue: validates each `deliver.v1` payload, runs
 * {@link deliver}, and turns its answer into queue operations. A retry and a park both move
 * the job to the delayed set (BullMQ's manual-delay pattern), so they are not counted as failed
 * job attempts; the job's own `attempts`/`backoff` are left for infrastructure failures (database
 * down), which the processor lets throw.
 */
import { DelayedError, UnrecoverableError, Worker, type Job } from "bullmq";
import type { RedisClient } from "@vw/queues";
import {
  INFRA_BACKOFF_TYPE,
  JOB_NAMES,
  JobPayloadError,
  QUEUE_NAMES,
  assertPayload,
  bullPrefix,
  infraBackoffDelay,
  isFreshJob,
  validateDeliverJob,
  type DeliverJobData,
} from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import { deliver, type DeliverDeps } from "./deliver.js";

/** Options of {@link createDeliveriesWorker}. */
export interface DeliveriesWorkerOptions {
  connection: RedisClient;
  keyPrefix: string;
  concurrency: number;
  jobLockMs: number;
  logger: Logger;
  deps: DeliverDeps;
}

/** Processes one job; exported for the worker and for tests that drive jobs directly. */
export async function processDeliverJob(job: Job, token: string | undefined, deps: DeliverDeps): Promise<string> {
  if (job.name !== JOB_NAMES.deliver) throw new UnrecoverableError(`unknown job name ${job.name} on ${QUEUE_NAMES.deliveries}`);
  let data: DeliverJobData;
  try {
    data = assertPayload(JOB_NAMES.deliver, validateDeliverJob, job.data);
  } catch (err) {
    if (err instanceof JobPayloadError) throw new UnrecoverableError(err.message);
    throw err;
  }
  if (job.id === undefined || token === undefined) throw new Error("deliver.v1 job without id or lock token");
  const result = await deliver(data, { jobId: job.id, token, fresh: isFreshJob(job) }, deps);
  if (result.kind === "done") return result.outcome;
  if (result.kind === "park") {
    // Into the delayed set first, then parked: a slot freed in between is seen by the park
    // script, which then promotes this job itself. The delay is only the safety net; the intent,
    // recorded first, lets the sweep finish the park if this process dies between the two.
    await deps.scheduler.parkAfter(new Map([[data.endpointId, [job.id]]]), () => job.moveToDelayed(Date.now() + deps.scheduler.parkTimeoutMs, token));
    throw new DelayedError();
  }
  await job.updateData({ ...data, attempt: result.attempt });
  await job.moveToDelayed(Date.now() + result.delayMs, token);
  throw new DelayedError();
}

/** Starts the deliveries worker. */
export function createDeliveriesWorker(options: DeliveriesWorkerOptions): Worker {
  const worker = new Worker(QUEUE_NAMES.deliveries, (job, token) => processDeliverJob(job, token, options.deps), {
    connection: options.connection,
    prefix: bullPrefix(options.keyPrefix),
    concurrency: options.concurrency,
    // A worker killed mid-delivery leaves its jobs stalled; they go back to the wait list and are
    // sent again (at least once). Several kills in a row must not fail a delivery.
    maxStalledCount: 10,
    lockDuration: options.jobLockMs,
    stalledInterval: options.jobLockMs,
    settings: {
      backoffStrategy: (attemptsMade: number, type?: string) => (type === INFRA_BACKOFF_TYPE ? infraBackoffDelay(attemptsMade) : 1000),
    },
  });
  worker.on("failed", (job, err) => {
    options.logger.error({ jobId: job?.id, attemptsMade: job?.attemptsMade, err: err as Error }, "delivery job failed");
  });
  worker.on("error", redisClientErrorListener(options.logger, "deliveries worker error"));
  return worker;
}
