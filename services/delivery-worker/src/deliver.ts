/**
 * One run of a `deliver.v1` job, as a plain function of its payload and dependencies: check that
 * the delivery may still be sent, sign and POST the stored bytes, log the attempt, apply the
 * spec's reaction table, and say what the queue should do next.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { EndpointScheduler, WindowSignal } from "@vw/queues";
import { traceAttempt } from "@vw/service-kit";
import { nextDelay, sendAttempt, type AttemptErrorKind, type AttemptTrigger, type DeliveryAgents, type SecretCache } from "@vw/webhook-core";
import type { AttemptSlots } from "./attempt-slots.js";
import type { DeliveryStore } from "./delivery-store.js";
import type { EndpointDisabler } from "./endpoint-disabler.js";
import type { WorkerMetrics } from "./metrics.js";

/** What the processor does with the job afterwards. */
export type DeliverResult =
  /** `stale`: the job is of an earlier run of the delivery (a Replay or recover started another). */
  | { kind: "done"; outcome: "delivered" | "failed" | "skipped" | "missing" | "not-pending" | "stale" }
  /** Not due yet (by its row, the schedule of record): the job waits until `delayMs` from now. */
  | { kind: "retry"; delayMs: number }
  /** The endpoint has no free slot: the job waits in its parked set (nothing was sent). */
  | { kind: "park" };

/** Which delivery a job sends: its id, its endpoint, and the run it was queued for (undefined: `deliver.v1`, whatever run the row has). */
export interface DeliveryRun {
  deliveryId: string;
  endpointId: string;
  run: number | undefined;
}

/**
 * How early a job may run against its row's due time (clock differences between the writer of the
 * row and this worker, BullMQ's delayed-set granularity): earlier than this, it waits again.
 */
export const DUE_TOLERANCE_MS = 1000;

/** Which run of which job this is: the scheduler's lease is per run. */
export interface JobRun {
  jobId: string;
  /** BullMQ's lock token of this run. */
  token: string;
  /** First run of a job added without a delay (`isFreshJob`): it holds no reservation. */
  fresh?: boolean;
}

/** Everything a delivery run needs; `main.ts` builds the live ones, tests their own. */
export interface DeliverDeps {
  store: DeliveryStore;
  /** The process's attempts in flight (DELIVERY_CONCURRENCY): held from the window's slot to the POST's answer. */
  attempts: AttemptSlots;
  scheduler: EndpointScheduler;
  disabler: EndpointDisabler;
  secrets: SecretCache;
  agents: DeliveryAgents;
  metrics: WorkerMetrics;
  /** A slot release that failed (Redis down): logged; the lease expires by itself. */
  onSchedulerError?: (err: unknown) => void;
  /**
   * What an attempt's error keeps off the delivery log, for the server's log only: the address a
   * policy refusal was about (`refused-by-policy`), or what the resolver said of a host that had
   * no address (`connection`, retried).
   */
  onHiddenDetail?: (info: { endpointId: string; deliveryId: string; kind: AttemptErrorKind; detail: string }) => void;
  timeoutMs: number;
  /**
   * SCHEDULER_SLOT_WAIT_MS: how long a job whose endpoint has every slot taken (and no backlog)
   * waits in process for one before it is parked (longer for an endpoint that answered lately:
   * EndpointScheduler.acquireWithin); 0 parks at once.
   */
  slotWaitMs?: number;
  retryDelays: readonly number[];
  disableAfterFailures: number;
  random?: () => number;
  now?: () => Date;
}

/**
 * Runs one attempt of a delivery.
 *
 * @param data the validated job payload
 * @param run the job's id and this run's lock token
 */
export async function deliver(data: DeliveryRun, run: JobRun, deps: DeliverDeps): Promise<DeliverResult> {
  // Taken before the endpoint's window, so a job waiting here holds nothing else; given back when
  // the POST has its answer (or the run stops before sending), not after the log write.
  const attemptDone = await deps.attempts.take();
  try {
    return await attempt(data, run, deps, attemptDone);
  } finally {
    attemptDone();
  }
}

/** The run of {@link deliver} once it holds an attempt slot; `attemptDone` gives the slot back (idempotent). */
async function attempt(data: DeliveryRun, run: JobRun, deps: DeliverDeps, attemptDone: () => void): Promise<DeliverResult> {
  // The slot and the row are asked for at once (Redis and PostgreSQL in parallel): one round trip
  // less on every attempt. A job that must park read its row for nothing, which is rare: jobs of a
  // congested endpoint are parked by their producer without being fetched.
  const loading = deps.store.load(data.deliveryId);
  // Observed at once: the read may fail (PostgreSQL restarting) while the slot is still being
  // waited for, and an unobserved rejection ends the process. Every path below awaits it.
  loading.catch(() => undefined);
  const slot = await deps.scheduler.acquireWithin(data.endpointId, run.jobId, run.token, deps.slotWaitMs ?? 0, run.fresh).catch(async (err: unknown) => {
    await loading.catch(() => undefined);
    throw err;
  });
  const grantedAt = performance.now();
  if (!slot.granted) {
    await loading.catch(() => undefined);
    deps.metrics.parked.inc();
    return { kind: "park" };
  }
  let signal: WindowSignal = "none";
  try {
    const delivery = await loading;
    // The throttle reserved a start `waitMs` after the slot was granted; the row read overlaps that
    // wait rather than adding to it (a start later than reserved narrows the gap to the next one).
    const untilStart = slot.waitMs - (performance.now() - grantedAt);
    if (untilStart > 0) await sleep(untilStart);
    if (delivery === null) {
      // Its endpoint (and so the delivery) was deleted, or retention removed it: nothing to send.
      deps.metrics.skipped.inc();
      return { kind: "done", outcome: "missing" };
    }
    if (!delivery.enabled) {
      await deps.store.markSkipped(delivery);
      deps.metrics.skipped.inc();
      return { kind: "done", outcome: "skipped" };
    }
    if (delivery.status !== "pending") {
      // Skipped by a disable while it waited, or already finished by a run that crashed before
      // completing its job: either way nothing more is owed.
      deps.metrics.skipped.inc();
      return { kind: "done", outcome: delivery.status === "skipped" ? "skipped" : "not-pending" };
    }
    if (data.run !== undefined && data.run !== delivery.run) {
      // A Replay or recover started another run with its own job; this one owes nothing.
      return { kind: "done", outcome: "stale" };
    }
    // The schedule runs on the system clock, as its writers' do (the row's times); `deps.now` is
    // the clock of what the receiver sees (`webhook-timestamp`).
    const dueInMs = delivery.nextAttemptAt === null ? 0 : delivery.nextAttemptAt.getTime() - Date.now();
    if (dueInMs > DUE_TOLERANCE_MS) {
      // The row says later: a retry whose job ran early (a stalled job taken back, a job rebuilt
      // from PostgreSQL, a duplicate). The row is the schedule; nothing is sent, nothing counted.
      return { kind: "retry", delayMs: dueInMs };
    }

    if ((delivery.rateLimitPerSecond ?? 0) !== slot.rate) {
      // The throttle did not know this endpoint's rate yet (first attempt, or changed since):
      // record it, and space this attempt under it too.
      const waitMs = await deps.scheduler.throttle(data.endpointId, run.jobId, run.token, delivery.rateLimitPerSecond);
      if (waitMs > 0) await sleep(waitMs);
    }

    const attemptsInRun = delivery.runAttempts;
    const trigger: AttemptTrigger = attemptsInRun > 0 ? "retry" : delivery.run > 0 ? "replay" : "initial";
    const attempt = await traceAttempt(delivery.url, { deliveryId: delivery.deliveryId, endpointId: delivery.endpointId, trigger }, () =>
      sendAttempt({
        url: delivery.url,
        deliveryId: delivery.deliveryId,
        attemptNumber: delivery.attemptCount + 1,
        trigger,
        body: delivery.body,
        secret: deps.secrets.secretOf(delivery.endpointId, delivery.secretSealed),
        agents: deps.agents,
        timeoutMs: deps.timeoutMs,
        now: deps.now,
      }),
    );
    attemptDone();
    if (attempt.errorDetail !== undefined && attempt.errorKind !== null) {
      deps.onHiddenDetail?.({ endpointId: delivery.endpointId, deliveryId: delivery.deliveryId, kind: attempt.errorKind, detail: attempt.errorDetail });
    }
    signal = windowSignal(attempt.responseStatus ?? undefined, attempt.errorKind ?? undefined);
    deps.metrics.observeAttempt(attempt.verdict, attempt.durationMs);
    // Lag is the pipeline's promise to receivers; a replay or a Test says nothing about it.
    if (!delivery.test && delivery.run === 0) {
      if (delivery.attemptCount === 0) deps.metrics.firstAttemptLag.observe(secondsBetween(delivery.createdAt, attempt.startedAt));
      if (attempt.verdict === "delivered") deps.metrics.successLag.observe(secondsBetween(delivery.createdAt, attempt.startedAt) + attempt.durationMs / 1000);
    }

    const retryDelay = attempt.verdict === "retry" ? nextDelay(attemptsInRun + 1, deps.retryDelays, deps.random) : null;
    const status = attempt.verdict === "delivered" ? "delivered" : retryDelay !== null ? "pending" : "failed";
    const failures = await deps.store.record({
      attempt,
      endpointId: delivery.endpointId,
      deliveryCreatedAt: delivery.createdAt,
      status,
      nextAttemptAt: retryDelay === null ? null : new Date(Date.now() + retryDelay),
      counts: !delivery.test,
      succeeded: attempt.verdict === "delivered",
    });

    if (attempt.verdict === "gone" || (failures !== null && failures >= deps.disableAfterFailures)) {
      const disabled = await deps.disabler.disable({
        endpointId: delivery.endpointId,
        reason: attempt.verdict === "gone" ? "gone" : "failures",
        deliveryId: delivery.deliveryId,
        status: attempt.responseStatus,
        error: attempt.error,
        consecutiveFailures: failures ?? 0,
      });
      if (disabled) deps.metrics.endpointsDisabled.inc({ reason: attempt.verdict === "gone" ? "gone" : "failures" });
      // A retry of this delivery would only find its endpoint disabled.
      if (status === "pending") return { kind: "done", outcome: "skipped" };
    }
    if (status === "pending" && retryDelay !== null) return { kind: "retry", delayMs: retryDelay };
    return { kind: "done", outcome: status === "delivered" ? "delivered" : "failed" };
  } finally {
    // Not awaited: the job completes without waiting for it. The release goes out with the other
    // slot decisions of this event-loop turn, on the connection that later carries the acquire of
    // whatever job this worker fetches next, so Redis frees the slot before that acquire. A failure
    // only leaves the lease to expire (the sweep then frees it).
    deps.scheduler.release(data.endpointId, run.jobId, run.token, signal).catch((err: unknown) => deps.onSchedulerError?.(err));
  }
}

/**
 * How an attempt's end moves the endpoint's window: an answer widens it, except 429 and 503
 * (the receiver asks for less: halved); a timeout or connection error shrinks it to the slow
 * window. The delivery's own retry schedule is decided elsewhere and does not change.
 */
export function windowSignal(status: number | undefined, errorKind: string | undefined): WindowSignal {
  if (status === 429 || status === 503) return "throttled";
  if (status !== undefined) return "answered";
  return errorKind === "timeout" || errorKind === "connection" ? "unresponsive" : "none";
}

/** Seconds from `from` to `to`, never negative (clocks of ingest and worker may differ slightly). */
function secondsBetween(from: Date, to: Date): number {
  return Math.max(0, (to.getTime() - from.getTime()) / 1000);
}
