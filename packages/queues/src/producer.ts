/**
 * Adding jobs, validated on the way in (STYLE: validate when added and when processed).
 */
import type { Queue } from "bullmq";
import { JOB_NAMES, assertPayload, validateEndpointDisabledMail, validateRecoverJob, type EndpointDisabledMailData, type RecoverJobData } from "./catalogue.js";

/**
 * Backoff of jobs whose processing failed for an infrastructure reason (database down, a bug):
 * the worker's `backoffStrategy` spaces these 1 s, 2 s, 4 s… up to 5 minutes. HTTP outcomes never
 * use it: the delivery retry schedule is applied by the worker itself.
 */
export const INFRA_BACKOFF_TYPE = "infra";
/** Infrastructure failures tolerated before a job is left failed for the operator. */
export const INFRA_ATTEMPTS = 20;

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
