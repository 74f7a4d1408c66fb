/**
 * The BullMQ worker of one shard of the deliveries queue: it runs endpoint drains (`d-<endpoint>`
 * jobs: drain.ts) and turns retry timers (`t-<endpoint>-<second>`) into wakes. A drain that fails
 * for the platform's reason (PostgreSQL or Redis unavailable, or any other exception: HTTP outcomes
 * never throw) spends no attempt of any delivery: its job waits a little in the delayed set and
 * runs again, and a dependency outage also pauses this worker's fetching until the dependency
 * answers (`DependencyGate`). A drain job never fails for good: while it sat in BullMQ's failed
 * set, its id would keep the endpoint from getting another.
 */
import { DelayedError, UnrecoverableError, Worker, type Job } from "bullmq";
import {
  JOB_NAMES,
  QUEUE_NAMES,
  endpointOfJobId,
  jobPayload,
  validateDrainJob,
  INFRA_BACKOFF_SETTINGS,
  WORKER_RUN_RETRY_DELAY_MS,
  type DrainSignals,
  type RedisClient,
} from "@vw/queues";
import { isDependencyUnavailable, redisClientErrorListener, type Logger } from "@vw/service-kit";
import { drainEndpoint, type DrainDeps, type DrainEnd } from "./drain.js";

/** A drain that failed for the platform's reason waits this long, doubling per run of its job, up to {@link PLATFORM_RETRY_MAX_MS}. */
export const PLATFORM_RETRY_MS = 1000;
/** Upper bound of that wait: once the dependency is back, every waiting drain runs within it. */
export const PLATFORM_RETRY_MAX_MS = 5000;

/** Options of {@link createDrainsWorker}. */
export interface DrainsWorkerOptions {
  connection: RedisClient;
  /** The BullMQ prefix of the shard's queue (`queue.opts.prefix`: its hash tag included). */
  prefix: string;
  /** Drains this worker runs at once (their attempts share the process's DELIVERY_CONCURRENCY). */
  concurrency: number;
  jobLockMs: number;
  logger: Logger;
  deps: DrainDeps;
  signals: Pick<DrainSignals, "wake" | "afterDrain">;
  /** Aborts when the process closes: drains stop starting attempts, give their claims back and stop lingering. */
  stop: AbortSignal;
  /** Told of a drain that failed because a dependency is unavailable (the worker's dependency gate). */
  onDependencyDown?: (err: unknown) => void;
  onPlatformFailure?: () => void;
}

/** What a job of the deliveries queue did. */
export type DrainJobResult = DrainEnd | "woken";

/** Processes one job of the deliveries queue; exported for tests that drive jobs directly. */
export async function processDrainJob(job: Job, token: string | undefined, options: DrainsWorkerOptions): Promise<DrainJobResult> {
  // Only today's layout: a job of another name (one job per delivery, `deliver.v1`, of an earlier
  // version) fails for good, never retried; the upgrade's `upgrade-queues` step removes them all
  // beforehand, and PostgreSQL holds the deliveries they stood for (upgrade-queues.ts).
  if (job.name !== JOB_NAMES.drain) throw new UnrecoverableError(`job ${job.name} is not of this version's layout (run upgrade-queues once when upgrading)`);
  const { endpointId } = jobPayload(JOB_NAMES.drain, validateDrainJob, job.data);
  // A timer job (`t-<endpoint>-<tick>`): wakes the endpoint, whose drain job is another.
  if (job.id === undefined || !job.id.startsWith("d-")) {
    await options.signals.wake([endpointId]);
    return "woken";
  }
  try {
    return await drainEndpoint(endpointId, options.deps, options.stop);
  } catch (err) {
    if (token === undefined) throw err;
    options.onPlatformFailure?.();
    if (isDependencyUnavailable(err)) options.onDependencyDown?.(err);
    else options.logger.error({ err: err as Error, endpointId }, "drain failed; it runs again shortly");
    const waitMs = Math.min(PLATFORM_RETRY_MAX_MS, PLATFORM_RETRY_MS * 2 ** Math.max(0, job.attemptsStarted - 1));
    // If this move fails too (Redis down), the original error goes to BullMQ, and the job comes
    // back when its lock expires (it is retried forever: see the file comment).
    await job.moveToDelayed(Date.now() + waitMs, token).catch(() => {
      throw err;
    });
    throw new DelayedError();
  }
}

/** Starts the worker of one shard of the deliveries queue. */
export function createDrainsWorker(options: DrainsWorkerOptions): Worker {
  // No span for the drain itself: each attempt is a span of its delivery's own trace (drain.ts).
  const processor = (job: Job, token: string | undefined) => processDrainJob(job, token, options);
  const worker = new Worker(QUEUE_NAMES.deliveries, processor, {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    // A worker killed mid-drain, or cut from Redis, leaves its job stalled; it goes back to the wait
    // list and the endpoint is drained again (its claims come back once their lease ends). No number
    // of kills or outages may fail a drain's job.
    maxStalledCount: 1_000_000,
    lockDuration: options.jobLockMs,
    stalledInterval: options.jobLockMs,
    settings: INFRA_BACKOFF_SETTINGS,
    runRetryDelay: WORKER_RUN_RETRY_DELAY_MS,
    removeOnFail: { count: 0 },
  });
  worker.on("completed", (job: Job, result: DrainJobResult) => {
    const endpointId = job.id?.startsWith("d-") ? endpointOfJobId(job.id) : null;
    if (endpointId === null) return;
    // Closing with work left: another replica takes it over at once. Otherwise, work flagged while
    // this job was finishing (its wake found the job and added none) gets a drain again.
    const next = result === "stopped" ? options.signals.wake([endpointId]) : options.signals.afterDrain(endpointId);
    next.catch((err: unknown) => options.logger.warn({ err: err as Error, endpointId }, "waking an endpoint after its drain failed; the reconciler's sweep will"));
  });
  worker.on("failed", (job, err) => {
    options.logger.error({ jobId: job?.id, err: err as Error }, "drain job failed");
  });
  worker.on("error", redisClientErrorListener(options.logger, "deliveries worker error"));
  return worker;
}
