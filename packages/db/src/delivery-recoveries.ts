/**
 * The one writer of `delivery_recoveries`: recover jobs as admin-api creates them and the delivery
 * worker runs them (status, progress, the cursor a retried job resumes from). Runs over the
 * process's {@link SqlRunner}, like the delivery log whose deliveries it re-queues.
 */
import { randomUUID } from "node:crypto";
import type { WindowCursor } from "./delivery-log/log-types.js";
import type { SqlRunner, Statement } from "./delivery-log/sql-runner.js";

/** States of a recovery, in the order it goes through them (`failed` ends it early). */
export type RecoveryState = "queued" | "running" | "done" | "failed";

/** A stored recovery. */
export interface DeliveryRecovery {
  id: string;
  endpointId: string;
  since: Date;
  until: Date;
  status: string;
  total: number;
  requeued: number;
  cursorCreatedAt: Date | null;
  cursorId: string | null;
  batchStamp: Date | null;
  error: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const COLUMNS = `id, endpoint_id AS "endpointId", since, until, status, total, requeued, cursor_created_at AS "cursorCreatedAt",
  cursor_id AS "cursorId", batch_stamp AS "batchStamp", error, created_at AS "createdAt", updated_at AS "updatedAt"`;

const INSERT: Statement = {
  name: "rc-insert",
  text: `INSERT INTO delivery_recoveries (id, endpoint_id, since, until, status, total, created_at, updated_at)
    VALUES ($1::uuid, $2::uuid, $3::timestamptz, $4::timestamptz, 'queued', $5::int, $6::timestamptz, $6::timestamptz) RETURNING ${COLUMNS}`,
};
const FIND: Statement = { name: "rc-find", text: `SELECT ${COLUMNS} FROM delivery_recoveries WHERE id = $1::uuid AND ($2::uuid IS NULL OR endpoint_id = $2::uuid)` };
const START: Statement = {
  name: "rc-start",
  text: `UPDATE delivery_recoveries SET status = 'running', updated_at = $2::timestamptz WHERE id = $1::uuid AND status IN ('queued', 'running') RETURNING id`,
};
const ADVANCE: Statement = {
  name: "rc-advance",
  text: `UPDATE delivery_recoveries SET cursor_created_at = $2::timestamptz, cursor_id = $3::uuid, requeued = requeued + $4::int, updated_at = $5::timestamptz
    WHERE id = $1::uuid`,
};
const FINISH: Statement = {
  name: "rc-finish",
  text: `UPDATE delivery_recoveries SET status = $2, error = $3, updated_at = $4::timestamptz WHERE id = $1::uuid AND status IN ('queued', 'running')`,
};

/** Recover jobs of endpoints. */
export class DeliveryRecoveries {
  constructor(private readonly db: SqlRunner) {}

  /** Records a queued recovery of the endpoint's failed deliveries created in [since, until). */
  async create(input: { endpointId: string; since: Date; until: Date; total: number }): Promise<DeliveryRecovery> {
    const [row] = await this.db.query<DeliveryRecovery>(INSERT, [randomUUID(), input.endpointId, input.since.toISOString(), input.until.toISOString(), input.total, new Date().toISOString()]);
    return toRecovery(row as DeliveryRecovery);
  }

  /** One recovery of the endpoint, or null. */
  async find(endpointId: string, id: string): Promise<DeliveryRecovery | null> {
    const [row] = await this.db.query<DeliveryRecovery>(FIND, [id, endpointId]);
    return row === undefined ? null : toRecovery(row);
  }

  /** The recovery, or null when it is gone (its endpoint was deleted). */
  async get(id: string): Promise<DeliveryRecovery | null> {
    const [row] = await this.db.query<DeliveryRecovery>(FIND, [id, null]);
    return row === undefined ? null : toRecovery(row);
  }

  /** Marks a queued (or interrupted running) recovery as running; false when it has already ended or is gone. */
  async start(id: string): Promise<boolean> {
    return (await this.db.query(START, [id, new Date().toISOString()])).length === 1;
  }

  /** Records one batch handed to the queue: `requeued` more, and the cursor after it. */
  async advance(id: string, cursor: WindowCursor, requeued: number): Promise<void> {
    await this.db.query(ADVANCE, [id, cursor.createdAt.toISOString(), cursor.id, requeued, new Date().toISOString()]);
  }

  /** Ends the recovery: `done`, or `failed` with the reason shown to the user. */
  async finish(id: string, status: "done" | "failed", error: string | null = null): Promise<void> {
    await this.db.query(FINISH, [id, status, error, new Date().toISOString()]);
  }
}

/** A row with its timestamps as Dates, whichever runner read it. */
function toRecovery(row: DeliveryRecovery): DeliveryRecovery {
  const date = (d: Date | string | null) => (d === null ? null : new Date(d));
  return {
    ...row,
    since: new Date(row.since),
    until: new Date(row.until),
    cursorCreatedAt: date(row.cursorCreatedAt),
    batchStamp: date(row.batchStamp),
    createdAt: new Date(row.createdAt),
    updatedAt: new Date(row.updatedAt),
  };
}

/** The resume position stored on a recovery, or null before its first batch. */
export function recoveryCursor(row: DeliveryRecovery): WindowCursor | null {
  return row.cursorCreatedAt !== null && row.cursorId !== null ? { createdAt: row.cursorCreatedAt, id: row.cursorId } : null;
}
