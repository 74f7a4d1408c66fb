/**
 * The reconciler part: the sweeps that wake, from PostgreSQL, every endpoint with due work after
 * Redis lost its data and every RECONCILE_INTERVAL_MS (reconciler.ts). Started after the drains it
 * wakes, closed before them; a process without one (tests sharing a database) gets null.
 */
import type { DeliveryLog } from "@vw/db";
import type { DeliveryQueues, DrainSignals, RedisClient } from "@vw/queues";
import type { Logger } from "@vw/service-kit";
import type { WorkerMetrics } from "./metrics.js";
import type { Part } from "./part.js";
import { Reconciler } from "./reconciler.js";
import type { WakeTimers } from "./wake-timers.js";

/** The running reconciler part. */
export interface ReconcilerPart extends Part {
  reconciler: Reconciler;
}

/** Starts the reconciler (its first check at once), or returns null without `reconcile`. */
export function startReconciler(options: {
  reconcile: { sweepIntervalMs: number; checkIntervalMs?: number } | null | undefined;
  keyPrefix: string;
  log: Pick<DeliveryLog, "dueEndpoints" | "pendingLater">;
  queues: DeliveryQueues;
  signals: Pick<DrainSignals, "wake" | "wakeAt">;
  timers: Pick<WakeTimers, "wakeAt">;
  redis: RedisClient;
  logger: Logger;
  metrics: WorkerMetrics;
}): ReconcilerPart | null {
  if (!options.reconcile) return null;
  const reconciler = new Reconciler({
    log: options.log,
    queues: options.queues,
    signals: options.signals,
    timers: options.timers,
    redis: options.redis,
    // One lease per deployment: one replica's reconciler is active at a time.
    leaseKey: `${options.keyPrefix.replace(/:+$/, "")}:reconciler:lease`,
    sweepIntervalMs: options.reconcile.sweepIntervalMs,
    checkIntervalMs: options.reconcile.checkIntervalMs,
    logger: options.logger,
    metrics: options.metrics,
  });
  reconciler.start();
  return { name: "reconciler", reconciler, close: () => reconciler.stop() };
}
