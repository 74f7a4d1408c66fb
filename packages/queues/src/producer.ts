/**
 * Adding jobs, validated on the way in (STYLE: validate when added and when processed).
 */
import type { Queue } from "bullmq";
import {
  JOB_NAMES,
  assertPayload,
  validateDeliverJob,
  validateEndpointDisabledMail,
  validateRecoverJob,
  type DeliverJobData,
  type EndpointDisabledMailData,
  type RecoverJobData,
} from "./catalogue.js";
import type { DeliveryQueues } from "./delivery-shards.js";
import { schedulerOf } from "./endpoint-scheduler.js";

/**
 * Backoff of jobs whose processing failed for an infrastructure reason (database down, a bug):
 * the worker's `backoffStrategy` spaces these 1 s, 2 s, 4 s… up to 5 minutes. HTTP outcomes never
 * use it: the delivery retry schedule is applied by the worker itself.
 */
export const INFRA_BACKOFF_TYPE = "infra";
/** Infrastructure failures tolerated before a job is left failed for the operator. */
export const INFRA_ATTEMPTS = 20;

/**
 * Most jobs of one shard added one by one rather than with one `addBulk`: building its pipeline
 * (ioredis copies every script command of the connection onto it) costs more CPU than adding this
 * many jobs singly, which leave in one write all the same (turn-writes.ts).
 */
const ADD_SINGLY_UP_TO = 8;

/**
 * Job id of a delivery run, a function of the row alone (deliveryId and run): the first run's is
 * the deliveryId, a Replay's or recover's `<deliveryId>-replay-<run>`. Queueing a run whose job
 * already exists is a no-op, so every writer (intake, Replay, recover, the analytics flush, the
 * reconciler) may queue it again without ever doubling it.
 */
export function deliverJobId(data: Pick<DeliverJobData, "deliveryId" | "run">): string {
  return data.run === 0 ? data.deliveryId : `${data.deliveryId}-replay-${data.run}`;
}

/** The run a job id names (see {@link deliverJobId}); undefined for ids of other shapes (`deliver.v1`'s timed replays). */
export function runOfJobId(jobId: string): number | undefined {
  const at = jobId.lastIndexOf("-replay-");
  if (at < 0) return jobId.length === 36 ? 0 : undefined;
  const run = Number(jobId.slice(at + 8));
  return Number.isSafeInteger(run) && run > 0 && run < 1_000_000 ? run : undefined;
}

/**
 * A delivery run to queue; `delayMs` for one not due yet (the reconciler's rebuild of a retry);
 * `traceMetadata` (service-kit's `traceMetadata()`) for a job added on behalf of another trace
 * than the adder's (an intake batch holds several requests' jobs). Neither is part of the payload.
 */
export type DeliverJobRequest = DeliverJobData & { delayMs?: number; traceMetadata?: string | undefined };

/**
 * Adds `deliver.v2` jobs to the shard of each one's endpoint (delivery-shards.ts), one
 * {@link enqueueShardDeliveries} per shard, the shards in parallel.
 */
export async function enqueueDeliveries(queues: DeliveryQueues, jobs: readonly DeliverJobRequest[]): Promise<void> {
  if (jobs.length === 0) return;
  await Promise.all([...queues.byShard(jobs)].map(([queue, group]) => enqueueShardDeliveries(queue, group)));
}

/**
 * Adds `deliver.v2` jobs, all of endpoints of this one shard queue, in few round trips. Initial runs have the deliveryId as job id, so adding
 * one that already waits is ignored by BullMQ (an ingest retry never doubles a delivery).
 *
 * Jobs of an endpoint that is congested (jobs already parked, or every slot of its window taken:
 * see `EndpointScheduler`) go straight to its parked set instead of the wait list: added delayed
 * by the scheduler's park timeout, then parked. A burst for one slow endpoint therefore never
 * stands in the wait list in front of the others' jobs. Added but not yet parked (a crash in
 * between) is safe: the park intents recorded before the add let a worker's sweep park them.
 */
export async function enqueueShardDeliveries(queue: Queue, jobs: readonly DeliverJobRequest[]): Promise<void> {
  if (jobs.length === 0) return;
  const payloads = jobs.map(({ delayMs, traceMetadata, ...data }) => ({
    payload: assertPayload(JOB_NAMES.deliver, validateDeliverJob, data),
    delayMs: delayMs ?? 0,
    trace: traceMetadata === undefined ? {} : { telemetry: { metadata: traceMetadata } },
  }));
  const scheduler = await schedulerOf(queue);
  const now = payloads.filter((p) => p.delayMs <= 0).map((p) => p.payload.endpointId);
  // This shard's calls leave with the other shards' ones of the batch, in one write.
  scheduler.writeTogetherThisTurn();
  const congested = await scheduler.congested([...new Set(now)]);
  const parked = new Map<string, string[]>();
  const bulk = payloads.map(({ payload, delayMs, trace }) => {
    const jobId = deliverJobId(payload);
    if (delayMs > 0) {
      // Not due yet: it waits in the delayed set like a retry, and asks for a slot when it runs.
      return { name: JOB_NAMES.deliver, data: payload, opts: { jobId, attempts: INFRA_ATTEMPTS, backoff: { type: INFRA_BACKOFF_TYPE }, delay: delayMs, ...trace } };
    }
    const park = congested.has(payload.endpointId);
    if (park) {
      const ids = parked.get(payload.endpointId);
      if (ids) ids.push(jobId);
      else parked.set(payload.endpointId, [jobId]);
    }
    return {
      name: JOB_NAMES.deliver,
      data: payload,
      opts: { jobId, attempts: INFRA_ATTEMPTS, backoff: { type: INFRA_BACKOFF_TYPE }, ...(park ? { delay: scheduler.parkTimeoutMs } : {}), ...trace },
    };
  });
  // A few jobs (a trickle's share of a shard) one by one: see ADD_SINGLY_UP_TO. Not with tracing
  // on: BullMQ's `add` makes a span per job and gives the job that span's context instead of the
  // one it carries, where `addBulk` makes one span per shard and keeps each job's own.
  const singly = bulk.length <= ADD_SINGLY_UP_TO && queue.opts.telemetry === undefined;
  const add = singly ? () => Promise.all(bulk.map((job) => queue.add(job.name, job.data, job.opts))) : () => queue.addBulk(bulk);
  scheduler.writeTogetherThisTurn();
  await scheduler.parkAfter(parked, add);
}

/** Queues the mail telling a world's administrators that an endpoint was disabled (once per disable). */
export async function enqueueEndpointDisabledMail(queue: Queue, data: EndpointDisabledMailData): Promise<void> {
  const payload = assertPayload(JOB_NAMES.endpointDisabledMail, validateEndpointDisabledMail, data);
  await queue.add(JOB_NAMES.endpointDisabledMail, payload, {
    jobId: `${payload.endpointId}-${Date.parse(payload.disabledAt)}`,
    attempts: INFRA_ATTEMPTS,
    backoff: { type: INFRA_BACKOFF_TYPE },
  });
}

/**
 * Queues a recover job. Its job id is the recoveryId, so adding it twice runs it once; infra
 * failures retry with the infra backoff, and the job resumes from the recovery's stored cursor.
 */
export async function enqueueRecovery(queue: Queue, data: RecoverJobData): Promise<void> {
  const payload = assertPayload(JOB_NAMES.recover, validateRecoverJob, data);
  await queue.add(JOB_NAMES.recover, payload, { jobId: payload.recoveryId, attempts: INFRA_ATTEMPTS, backoff: { type: INFRA_BACKOFF_TYPE } });
}

/** The worker's backoff for {@link INFRA_BACKOFF_TYPE}: 1 s doubling, capped at 5 minutes. */
export function infraBackoffDelay(attemptsMade: number): number {
  return Math.min(300_000, 1000 * 2 ** Math.max(0, attemptsMade - 1));
}

/** A worker's `settings`: {@link infraBackoffDelay} for jobs added with {@link INFRA_BACKOFF_TYPE}, 1 s otherwise. */
export const INFRA_BACKOFF_SETTINGS = {
  backoffStrategy: (attemptsMade: number, type?: string): number => (type === INFRA_BACKOFF_TYPE ? infraBackoffDelay(attemptsMade) : 1000),
};

/**
 * A worker's `runRetryDelay`: how long BullMQ waits before it tries again a fetch, or the move of a
 * finished job, that failed because the connection was lost. BullMQ's default, 15 s, outlasts a
 * Cluster failover or a Redis restart many times over: a shard's worker that hit it fetched
 * nothing for 15 s after its primary's replica took over, and held its jobs' budget meanwhile.
 */
export const WORKER_RUN_RETRY_DELAY_MS = 1000;
