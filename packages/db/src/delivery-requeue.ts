/**
 * Sending stored deliveries again (Replay of one, recover of many): the one path that puts a
 * delivery back to `pending` so that a `replay` job of the delivery worker sends its stored bytes
 * under the same deliveryId, and that undoes it when the job could not be queued.
 */
import type { PrismaClient } from "./generated/prisma/client.js";

/** A delivery put back to `pending`, with what it was before (to undo it if its job cannot be queued). */
export interface RequeuedDelivery {
  deliveryId: string;
  endpointId: string;
  previous: { status: string; nextAttemptAt: Date | null; updatedAt: Date };
  /** The `updated_at` the requeue wrote: the undo applies only while it is still there. */
  requeuedAt: Date;
}

/** A window on the deliveries' creation time: `since` inclusive, `until` exclusive. */
export interface CreationWindow {
  since: Date;
  until: Date;
}

/**
 * Puts the given deliveries of an ENABLED endpoint back to `pending` (no next attempt), in one
 * statement that locks them and checks the endpoint, so a disable landing at the same moment is
 * never overtaken; with `onlyStatus`, only deliveries still in that status (a recover never
 * re-sends one that a Replay or a retry already took). Returns those it changed: none when the
 * endpoint is disabled (or gone).
 */
export async function requeueDeliveries(
  prisma: PrismaClient,
  endpointId: string,
  deliveryIds: readonly string[],
  options: { onlyStatus?: string } = {},
): Promise<RequeuedDelivery[]> {
  if (deliveryIds.length === 0) return [];
  const rows = await prisma.$queryRaw<{ id: string; prev_status: string; prev_next: Date | null; prev_updated: Date; updated_at: Date }[]>`
    WITH target AS (
      SELECT d.id, d.status, d.next_attempt_at, d.updated_at
      FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.enabled
      WHERE d.endpoint_id = ${endpointId}::uuid AND d.id = ANY(${[...deliveryIds]}::uuid[])
        AND (${options.onlyStatus ?? null}::text IS NULL OR d.status = ${options.onlyStatus ?? null}::text)
      FOR UPDATE OF d
    )
    UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = NULL, updated_at = clock_timestamp()
    FROM target WHERE d.id = target.id
    RETURNING d.id, target.status AS prev_status, target.next_attempt_at AS prev_next, target.updated_at AS prev_updated, d.updated_at`;
  return rows.map((row) => ({
    deliveryId: row.id,
    endpointId,
    previous: { status: row.prev_status, nextAttemptAt: row.prev_next, updatedAt: row.prev_updated },
    requeuedAt: row.updated_at,
  }));
}

/**
 * Undoes a {@link requeueDeliveries} whose job could not be queued, for each delivery that nothing
 * touched since (a worker run of an earlier job, a disable): it gets its previous status back.
 */
export async function restoreDeliveries(prisma: PrismaClient, requeued: readonly RequeuedDelivery[]): Promise<void> {
  if (requeued.length === 0) return;
  await prisma.$executeRaw`
    UPDATE webhook_deliveries d SET status = p.status, next_attempt_at = p.next_attempt_at, updated_at = p.updated_at
    FROM unnest(${requeued.map((r) => r.deliveryId)}::uuid[], ${requeued.map((r) => r.requeuedAt)}::timestamptz[],
      ${requeued.map((r) => r.previous.status)}::text[], ${requeued.map((r) => r.previous.nextAttemptAt)}::timestamptz[],
      ${requeued.map((r) => r.previous.updatedAt)}::timestamptz[]) AS p(id, requeued_at, status, next_attempt_at, updated_at)
    WHERE d.id = p.id AND d.status = 'pending' AND d.updated_at = p.requeued_at`;
}

/** How many deliveries of the endpoint in `status` were created in the window. */
export async function countDeliveriesInWindow(prisma: PrismaClient, endpointId: string, status: string, window: CreationWindow): Promise<number> {
  const [row] = await prisma.$queryRaw<{ n: number }[]>`
    SELECT count(*)::int AS n FROM webhook_deliveries
    WHERE endpoint_id = ${endpointId}::uuid AND status = ${status} AND created_at >= ${window.since} AND created_at < ${window.until}`;
  return row?.n ?? 0;
}

/** Keyset position in a window walked oldest first. */
export interface WindowCursor {
  createdAt: Date;
  id: string;
}

/**
 * The next `limit` ids of the endpoint's deliveries in `status` created in the window, oldest
 * first (created_at, then id), after `cursor`.
 */
export async function deliveriesInWindowPage(
  prisma: PrismaClient,
  endpointId: string,
  status: string,
  window: CreationWindow,
  cursor: WindowCursor | null,
  limit: number,
): Promise<WindowCursor[]> {
  const rows = await prisma.$queryRaw<{ id: string; created_at: Date }[]>`
    SELECT id, created_at FROM webhook_deliveries
    WHERE endpoint_id = ${endpointId}::uuid AND status = ${status} AND created_at >= ${window.since} AND created_at < ${window.until}
      AND (${cursor?.createdAt ?? null}::timestamptz IS NULL OR (created_at, id) > (${cursor?.createdAt ?? null}::timestamptz, ${cursor?.id ?? null}::uuid))
    ORDER BY created_at, id
    LIMIT ${limit}`;
  return rows.map((row) => ({ id: row.id, createdAt: row.created_at }));
}
