/**
 * The BullMQ worker of the deliveries queue: validates each `deliver.v2` (or `deliver.v1`) payload,
 * runs {@link deliver}, and turns its answer into queue operations. A retry and a park both move
 * the job to the delayed set (BullMQ's manual-delay pattern), so they are not counted as failed
 * job attempts.
 *
 * A run that fails for the platform's own reason (PostgreSQL or Redis unavailable, or any other
 * exception: HTTP outcomes never throw) is not the receiver's failure: nothing was logged against
 * it, so none of its ten attempts is spent and its endpoint's failures do not grow. The job waits
 * a little in the delayed set and runs again; a dependency outage also pauses this worker's
 * fetching until the dependency answers (`DependencyGate`). Should even that move fail (Redis
 * down), the job's lock expires and BullMQ hands it out again; and should the job be lost with
 * Redis's data, the reconciler queues it again from its row.
 */
import { DelayedError, UnrecoverableError, Worker, type Job } from "bullmq";
import type { RedisClient } from "@vw/queues";
import {
  JOB_NAMES,
  QUEUE_NAMES,
  isFreshJob,
  validateDeliverJob,
  validateLegacyDeliverJob,
  INFRA_BACKOFF_SETTINGS,
  WORKER_RUN_RETRY_DELAY_MS,
  jobPayload,
} from "@vw/queues";
import { isDependencyUnavailable, redisClientErrorListener, type Logger, withJobSpan } from "@vw/service-kit";
import { deliver, type DeliverDeps, type DeliveryRun } from "./deliver.js";
import { shareJobBudget, type JobBudget } from "./job-budget.js";

/** A run that failed for the platform's reason waits this long, doubling per run of the job, up to {@link PLATFORM_RETRY_MAX_MS}. */
export const PLATFORM_RETRY_MS = 1000;
/** Upper bound of that wait: once the dependency is back, every waiting job runs within it. */
export const PLATFORM_RETRY_MAX_MS = 5000;

/** Options of {@link createDeliveriesWorker}. */
export interface DeliveriesWorkerOptions {
  connection: RedisClient;
  /** The BullMQ prefix of the shard's queue (`queue.opts.prefix`: its hash tag included). */
  prefix: string;
  /** Jobs this worker may hold at most (the whole process's budget: one shard may use all of it). */
  concurrency: number;
  /** The process's budget, shared by every shard's worker (job-budget.ts). */
  budget: JobBudget;
  jobLockMs: number;
  logger: Logger;
  deps: DeliverDeps;
  /** Told of a run that failed because a dependency is unavailable (the worker's dependency gate). */
  onDependencyDown?: (err: unknown) => void;
}

/** The delivery run a job names, from either payload version; an invalid payload is unrecoverable. */
export function deliveryRunOf(job: Pick<Job, "name" | "data">): DeliveryRun {
  if (job.name === JOB_NAMES.deliver) return jobPayload(JOB_NAMES.deliver, validateDeliverJob, job.data);
  if (job.name === JOB_NAMES.deliverV1) {
    const legacy = jobPayload(JOB_NAMES.deliverV1, validateLegacyDeliverJob, job.data);
    return { deliveryId: legacy.deliveryId, endpointId: legacy.endpointId, run: undefined };
  }
  throw new UnrecoverableError(`unknown job name ${job.name} on ${QUEUE_NAMES.deliveries}`);
}

/**
 * Processes one job; exported for the worker and for tests that drive jobs directly. A failure of
 * the platform (see the file comment) moves the job to the delayed set; `onDependencyDown` hears of
 * those caused by an unavailable dependency.
 */
export async function processDeliverJob(job: Job, token: string | undefined, deps: DeliverDeps, onDependencyDown?: (err: unknown) => void): Promise<string> {
  const data = deliveryRunOf(job);
  if (job.id === undefined || token === undefined) throw new Error(`${job.name} job without id or lock token`);
  let result: Awaited<ReturnType<typeof deliver>>;
  try {
    result = await deliver(data, { jobId: job.id, token, fresh: isFreshJob(job) }, deps);
  } catch (err) {
    if (isDependencyUnavailable(err)) onDependencyDown?.(err);
    const waitMs = Math.min(PLATFORM_RETRY_MAX_MS, PLATFORM_RETRY_MS * 2 ** Math.max(0, job.attemptsStarted - 1));
    // If this move fails too (Redis down), the original error goes to BullMQ, and the job comes
    // back when its lock expires.
    await job.moveToDelayed(Date.now() + waitMs, token).catch(() => {
      throw err;
    });
    throw new DelayedError();
  }
  if (result.kind === "done") return result.outcome;
  if (result.kind === "park") {
    // Into the delayed set first, then parked: a slot freed in between is seen by the park
    // script, which then promotes this job itself. The delay is only the safety net; the intent,
    // recorded first, lets the sweep finish the park if this process dies between the two.
    await deps.scheduler.parkAfter(new Map([[data.endpointId, [job.id]]]), () => job.moveToDelayed(Date.now() + deps.scheduler.parkTimeoutMs, token));
    throw new DelayedError();
  }
  await job.moveToDelayed(Date.now() + result.delayMs, token);
  throw new DelayedError();
}

/** Starts the worker of one deliveries shard; `deps.scheduler` is that shard's. */
export function createDeliveriesWorker(options: DeliveriesWorkerOptions): Worker {
  // With tracing on, each job's run is a span continuing the trace of whoever added it. Not
  // BullMQ's `telemetry` option: that would run the worker's own Redis work under the span too.
  const processor = (job: Job, token: string | undefined) => withJobSpan(job, () => processDeliverJob(job, token, options.deps, options.onDependencyDown));
  const worker = new Worker(QUEUE_NAMES.deliveries, processor, {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    // Started below, once the budget is shared: no fetch may happen without a permit.
    autorun: false,
    // A worker killed mid-delivery, or cut from Redis, leaves its jobs stalled; they go back to the
    // wait list and are sent again (at least once). No number of kills or outages may fail a
    // delivery's job: its row, not BullMQ's count, says what is still owed.
    maxStalledCount: 1_000_000,
    lockDuration: options.jobLockMs,
    stalledInterval: options.jobLockMs,
    settings: INFRA_BACKOFF_SETTINGS,
    runRetryDelay: WORKER_RUN_RETRY_DELAY_MS,
  });
  worker.on("failed", (job, err) => {
    options.logger.error({ jobId: job?.id, attemptsMade: job?.attemptsMade, err: err as Error }, "delivery job failed");
  });
  worker.on("error", redisClientErrorListener(options.logger, "deliveries worker error"));
  shareJobBudget(worker, options.budget);
  worker.run().catch((err: unknown) => options.logger.error({ err: err as Error }, "deliveries worker stopped"));
  return worker;
}
