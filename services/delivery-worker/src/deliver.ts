/**
 * One run of a `deliver.v1` job, as a plain function of its payload and dependencies: check that
 * the delivery may still be sent, sign and POST the stored bytes, log the attempt, apply the
 * spec's reaction table, and say what the queue should do next.
 */
import type { DeliverJobData } from "@vw/queues";
import { nextDelay, sendAttempt, toAttemptRecord, type AttemptTrigger, type DeliveryAgents, type SecretCache } from "@vw/webhook-core";
import type { DeliveryStore } from "./delivery-store.js";
import type { EndpointDisabler } from "./endpoint-disabler.js";
import type { AttemptSignal, EndpointLimiter } from "./endpoint-limiter.js";
import type { WorkerMetrics } from "./metrics.js";

/** What the processor does with the job afterwards. */
export type DeliverResult =
  | { kind: "done"; outcome: "delivered" | "failed" | "skipped" | "missing" | "not-pending" }
  | { kind: "retry"; delayMs: number; attempt: number }
  | { kind: "defer"; delayMs: number };

/** Everything a delivery run needs; `main.ts` builds the live ones, tests their own. */
export interface DeliverDeps {
  store: DeliveryStore;
  limiter: EndpointLimiter;
  disabler: EndpointDisabler;
  secrets: SecretCache;
  agents: DeliveryAgents;
  metrics: WorkerMetrics;
  timeoutMs: number;
  retryDelays: readonly number[];
  disableAfterFailures: number;
  random?: () => number;
  now?: () => Date;
}

/**
 * Runs one attempt of a delivery.
 *
 * @param data the validated job payload
 * @param timesDeferred how often this job was already turned away by the endpoint limiter
 */
export async function deliver(data: DeliverJobData, timesDeferred: number, deps: DeliverDeps): Promise<DeliverResult> {
  if (!deps.limiter.tryAcquire(data.endpointId)) {
    deps.metrics.deferred.inc();
    return { kind: "defer", delayMs: deps.limiter.deferDelay(data.endpointId, timesDeferred) };
  }
  let signal: AttemptSignal = "none";
  try {
    const delivery = await deps.store.load(data.deliveryId);
    if (delivery === null) {
      // Its endpoint (and so the delivery) was deleted, or retention removed it: nothing to send.
      deps.metrics.skipped.inc();
      return { kind: "done", outcome: "missing" };
    }
    if (!delivery.enabled) {
      await deps.store.markSkipped(delivery.deliveryId);
      deps.metrics.skipped.inc();
      return { kind: "done", outcome: "skipped" };
    }
    if (delivery.status !== "pending") {
      // Skipped by a disable while it waited, or already finished by a run that crashed before
      // completing its job: either way nothing more is owed.
      deps.metrics.skipped.inc();
      return { kind: "done", outcome: delivery.status === "skipped" ? "skipped" : "not-pending" };
    }

    const attemptsInRun = data.attempt ?? 0;
    const trigger: AttemptTrigger = attemptsInRun > 0 ? "retry" : data.trigger;
    const sent = await sendAttempt({
      url: delivery.url,
      deliveryId: delivery.deliveryId,
      body: delivery.body,
      secret: deps.secrets.secretOf(delivery.endpointId, delivery.secretSealed),
      agents: deps.agents,
      timeoutMs: deps.timeoutMs,
      now: deps.now,
    });
    const errorKind = sent.outcome.error?.kind;
    signal = sent.outcome.status !== undefined ? "answered" : errorKind === "timeout" || errorKind === "connection" ? "unresponsive" : "none";
    deps.metrics.observeAttempt(sent.verdict, sent.outcome.durationMs);
    // Lag is the pipeline's promise to receivers; a replay or a Test says nothing about it.
    if (!delivery.test && data.trigger === "initial") {
      if (delivery.attemptCount === 0) deps.metrics.firstAttemptLag.observe(secondsBetween(delivery.createdAt, sent.startedAt));
      if (sent.verdict === "delivered") deps.metrics.successLag.observe(secondsBetween(delivery.createdAt, sent.startedAt) + sent.outcome.durationMs / 1000);
    }

    const retryDelay = sent.verdict === "retry" ? nextDelay(attemptsInRun + 1, deps.retryDelays, deps.random) : null;
    const now = (deps.now ?? (() => new Date()))();
    const status = sent.verdict === "delivered" ? "delivered" : retryDelay !== null ? "pending" : "failed";
    const failures = await deps.store.record({
      attempt: toAttemptRecord(sent, delivery.deliveryId, delivery.attemptCount + 1, trigger),
      endpointId: delivery.endpointId,
      status,
      nextAttemptAt: retryDelay === null ? null : new Date(now.getTime() + retryDelay),
      counts: !delivery.test,
      succeeded: sent.verdict === "delivered",
    });

    if (sent.verdict === "gone" || (failures !== null && failures >= deps.disableAfterFailures)) {
      const disabled = await deps.disabler.disable({
        endpointId: delivery.endpointId,
        reason: sent.verdict === "gone" ? "gone" : "failures",
        deliveryId: delivery.deliveryId,
        status: sent.outcome.status ?? null,
        error: sent.outcome.error?.message ?? null,
        consecutiveFailures: failures ?? 0,
      });
      if (disabled) deps.metrics.endpointsDisabled.inc({ reason: sent.verdict === "gone" ? "gone" : "failures" });
      // A retry of this delivery would only find its endpoint disabled.
      if (status === "pending") return { kind: "done", outcome: "skipped" };
    }
    if (status === "pending" && retryDelay !== null) return { kind: "retry", delayMs: retryDelay, attempt: attemptsInRun + 1 };
    return { kind: "done", outcome: status === "delivered" ? "delivered" : "failed" };
  } finally {
    deps.limiter.release(data.endpointId, signal);
  }
}

/** Seconds from `from` to `to`, never negative (clocks of ingest and worker may differ slightly). */
function secondsBetween(from: Date, to: Date): number {
  return Math.max(0, (to.getTime() - from.getTime()) / 1000);
}
