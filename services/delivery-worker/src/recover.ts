/**
 * Runs one recovery (`recover.v1`): the failed deliveries of an endpoint created in the
 * recovery's window, oldest first, batch by batch, each put back to `pending` in a new run
 * through the same path as Replay (`DeliveryLog.requeue` of @vw/db, then a wake of the endpoint),
 * so every one is sent again with its deliveryId and stored bytes. After each batch the recovery
 * records its progress and cursor: a job retried after a failure resumes after the last batch
 * instead of starting over. A wake that fails (Redis unavailable) fails nothing: the deliveries are
 * pending and due in PostgreSQL, and the reconciler's next sweep wakes the endpoint.
 */
import type { DrainSignals } from "@vw/queues";
import { recoveryCursor, type DeliveryRecoveries, type DeliveryHistory, type DeliveryLog, type SqlRunner } from "@vw/db";
import type { Logger } from "@vw/service-kit";

/** Deliveries put back per statement. */
export const RECOVER_BATCH_SIZE = 200;

/** What a recovery run needs. */
export interface RecoverDeps {
  /** The process's runner, its recoveries' owner, delivery log and history. */
  sql: SqlRunner;
  recoveries: DeliveryRecoveries;
  log: DeliveryLog;
  history: DeliveryHistory;
  /** Wakes the endpoint once a batch is back to pending. */
  signals: Pick<DrainSignals, "wake">;
  logger: Logger;
  batchSize?: number;
}

/** $1 endpoint id: whether it is enabled (no row: deleted). */
const ENDPOINT_ENABLED = { name: "recover-endpoint-enabled", text: "SELECT enabled FROM webhook_endpoints WHERE id = $1::uuid" };

/** How a run ended: `gone` when the recovery no longer exists (its endpoint was deleted) or had already ended. */
export type RecoverOutcome = { status: "done" | "failed"; requeued: number } | { status: "gone" };

/** Runs the recovery `recoveryId` to its end; throws on an infrastructure failure (the job retries). */
export async function runRecovery(deps: RecoverDeps, recoveryId: string): Promise<RecoverOutcome> {
  const { recoveries } = deps;
  if (!(await recoveries.start(recoveryId))) return { status: "gone" };
  const recovery = await recoveries.get(recoveryId);
  if (!recovery) return { status: "gone" };
  const { endpointId } = recovery;
  const window = { since: recovery.since, until: recovery.until };
  let cursor = recoveryCursor(recovery);
  let requeuedTotal = recovery.requeued;
  for (;;) {
    const page = await deps.history.pageInWindow(endpointId, "failed", window, cursor, deps.batchSize ?? RECOVER_BATCH_SIZE);
    const last = page.at(-1);
    if (last === undefined) break;
    const requeued = await deps.log.requeue(endpointId, page.map((row) => row.id), { onlyStatus: "failed" });
    if (requeued.length === 0) {
      const [endpoint] = await deps.sql.query<{ enabled: boolean }>(ENDPOINT_ENABLED, [endpointId]);
      if (!endpoint) return { status: "gone" };
      if (!endpoint.enabled) {
        const error = `The endpoint was disabled while recovering: ${requeuedTotal} deliveries had been queued again, the others were not. Enable it, then recover again.`;
        await recoveries.finish(recoveryId, "failed", error);
        deps.logger.warn({ recoveryId, endpointId, requeued: requeuedTotal }, "recover stopped: endpoint disabled");
        return { status: "failed", requeued: requeuedTotal };
      }
    }
    if (requeued.length > 0) {
      await deps.signals.wake([endpointId]).catch((err: unknown) => deps.logger.warn({ err: err as Error, recoveryId, endpointId }, "waking the endpoint failed; the reconciler's sweep will"));
    }
    cursor = last;
    requeuedTotal += requeued.length;
    await recoveries.advance(recoveryId, cursor, requeued.length);
  }
  await recoveries.finish(recoveryId, "done");
  deps.logger.info({ recoveryId, endpointId, requeued: requeuedTotal }, "recover done");
  return { status: "done", requeued: requeuedTotal };
}
