/**
 * The one owner of the delivery log: `webhook_events` (deduplication records), `webhook_deliveries`
 * and `delivery_attempts`. Every writer goes through it: event intake (fan-out), the analytics
 * flush, the auth hook and the Test action create deliveries; the worker's group commit, the hook
 * and Test record attempts; Replay and recover put deliveries back to `pending`; endpoint disables
 * skip what is pending. Reads for admin-api are in {@link DeliveryHistory}; partitions and retention
 * in {@link LogPartitions}. Only this folder knows the tables' columns.
 *
 * The tables are range-partitioned by day (see README "Delivery log"): a delivery's partition is
 * its `created_at`, which for a new delivery is the time inside its UUIDv7 id, and an attempt's
 * partition is its delivery's. Every statement names the partition key next to the id, so
 * PostgreSQL touches one partition per row instead of probing all of them.
 */
import { randomUUID } from "node:crypto";
import type { AttemptRecord } from "@vw/webhook-core";
import type {
  AttemptResult,
  DeliveryForAttempt,
  FinishedDelivery,
  IntakeEvent,
  IntakeEventRef,
  IntakePlan,
  IntakeWorld,
  LogDeliveryStatus,
  NewDelivery,
  RequeuedDelivery,
  ScheduleCursor,
  ScheduledDelivery,
} from "./log-types.js";
import type { SqlRunner } from "./sql-runner.js";
import * as sql from "./log-statements.js";
import { uuidV7, uuidV7Time } from "./uuid-v7.js";

/** A new deliveryId: a UUIDv7 of `now` (its time is the delivery's creation time). */
export const newDeliveryId = (now: Date = new Date()): string => uuidV7(now.getTime());

/** The creation time (partition key) of a delivery id: its UUIDv7 time, else `fallback`. */
export const deliveryCreatedAt = (id: string, fallback: Date = new Date()): Date => uuidV7Time(id) ?? fallback;

/** What {@link DeliveryLog.intake} did. */
export interface IntakeResult {
  fresh: IntakeEvent[];
  known: IntakeEvent[];
  created: NewDelivery[];
  /** Deliveries of known events still pending and never attempted: their job may have been lost. */
  unattempted: { deliveryId: string; endpointId: string; run: number }[];
}

interface LoadRow {
  id: string;
  endpoint_id: string;
  created_at: Date;
  body: Buffer | Uint8Array;
  status: string;
  attempt_count: number;
  next_attempt_at: Date | null;
  run: number;
  run_attempts: number;
  test: boolean;
  url: string;
  enabled: boolean;
  secret_sealed: string | null;
  rate_limit_per_second: number | null;
}

/** See the file comment. */
export class DeliveryLog {
  constructor(private readonly db: SqlRunner) {}

  /**
   * Stores events (deduplicated on the producer's id within the world, across every partition) and
   * the deliveries of the new ones, in one transaction of two statements (three when `apply` writes,
   * four when some events were known): the first reads the worlds `request` names with their
   * endpoints subscribed to `request.subscriptions` and locks the events' keys; `plan` then turns
   * those worlds into the events and the deliveries of every event (it throws, and nothing is
   * stored, when a world is unknown); the second stores the events not stored yet and only their
   * deliveries. `apply` runs in the same transaction with the new events (the member directory's
   * changes: with the events, or not at all). Concurrent intakes of the same id are serialized by
   * a transaction advisory lock per (world, producer id), taken in one order.
   */
  async intake(
    request: { events: readonly IntakeEventRef[]; subscriptions: readonly string[] },
    plan: (worlds: readonly IntakeWorld[], createdAt: Date) => IntakePlan | Promise<IntakePlan>,
    apply?: (fresh: readonly IntakeEvent[], tx: SqlRunner) => Promise<void>,
  ): Promise<IntakeResult> {
    const createdAt = new Date();
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<WorldEndpointRow>(sql.RESOLVE_AND_LOCK_EVENTS, [
        request.events.map((e) => e.organizationSlug),
        request.events.map((e) => e.worldSlug),
        request.events.map((e) => e.producerId),
        request.subscriptions,
      ]);
      const { events, deliveries } = await plan(intakeWorlds(rows), createdAt);
      const [stored] = await tx.query<{ fresh: string[]; n: number; gone: string[] }>(sql.INSERT_EVENTS_AND_DELIVERIES, [
        events.map((e) => e.rowId),
        events.map((e) => e.worldId),
        events.map((e) => e.producerId),
        events.map((e) => e.type),
        events.map((e) => e.occurredAt),
        createdAt.toISOString(),
        ...deliveryColumns(deliveries, createdAt),
      ]);
      const ids = new Set(stored?.fresh ?? []);
      // An endpoint deleted since the first statement read it gets nothing (and no job): it is gone.
      const gone = new Set(stored?.gone ?? []);
      const fresh = events.filter((e) => ids.has(e.rowId));
      const known = events.filter((e) => !ids.has(e.rowId));
      const created = deliveries.filter((d) => d.event !== undefined && ids.has(d.event.rowId) && !gone.has(d.endpointId));
      if (apply && fresh.length > 0) await apply(fresh, tx);
      const unattempted =
        known.length === 0
          ? []
          : await tx.query<{ id: string; endpoint_id: string; run: number }>(sql.UNATTEMPTED_OF_EVENTS, [known.map((k) => k.worldId), known.map((k) => k.producerId)]);
      return { fresh, known, created, unattempted: unattempted.map((row) => ({ deliveryId: row.id, endpointId: row.endpoint_id, run: row.run })) };
    });
  }

  /**
   * Creates pending deliveries in one statement; with `ignoreExisting`, an id already stored is
   * left as it is (a writer retrying the same batch). Those of an endpoint deleted meanwhile are
   * left out (their jobs find nothing to send). Resolves with how many rows were inserted.
   */
  async create(deliveries: readonly NewDelivery[], options: { ignoreExisting?: boolean } = {}): Promise<number> {
    return (await insertDeliveries(this.db, deliveries, options.ignoreExisting ?? false)).inserted;
  }

  /**
   * Deliveries whose only attempt is over (auth hook calls, Test sends), each with that attempt and
   * its final status (`delivered` when the attempt was, else `failed`), in ONE statement: no
   * delivery without its attempt. A delivery whose endpoint is gone meanwhile is left out.
   */
  async recordFinished(rows: readonly FinishedDelivery[]): Promise<void> {
    if (rows.length === 0) return;
    const a = rows.map((r) => r.attempt);
    await this.db.query(sql.RECORD_FINISHED, [
      rows.map((r) => r.delivery.id),
      rows.map((r) => r.delivery.endpointId),
      rows.map((r) => r.delivery.worldId),
      rows.map((r) => r.delivery.type),
      rows.map((r) => r.delivery.body.toString("base64")),
      rows.map((r) => r.test),
      a.map((x) => (x.verdict === "delivered" ? "delivered" : "failed")),
      rows.map((r) => r.finishedAt.toISOString()),
      rows.map((r) => deliveryCreatedAt(r.delivery.id, r.attempt.startedAt).toISOString()),
      ...attemptColumns(a),
    ]);
  }

  /** Deliveries with their endpoints' current state, for the worker; null where either is gone. */
  async loadForAttempt(ids: readonly string[]): Promise<(DeliveryForAttempt | null)[]> {
    const [timed, untimed] = splitByIdTime(ids);
    const rows = [
      ...(timed.length === 0 ? [] : await this.db.query<LoadRow>(sql.LOAD_TIMED, [timed.map((t) => t.id), timed.map((t) => t.at)])),
      ...(untimed.length === 0 ? [] : await this.db.query<LoadRow>(sql.LOAD_UNTIMED, [untimed])),
    ];
    const byId = new Map(rows.map((row) => [row.id, row]));
    return ids.map((id) => {
      const row = byId.get(id);
      if (!row) return null;
      return {
        deliveryId: row.id,
        endpointId: row.endpoint_id,
        createdAt: new Date(row.created_at),
        body: Buffer.from(row.body),
        status: row.status as LogDeliveryStatus,
        attemptCount: row.attempt_count,
        nextAttemptAt: row.next_attempt_at === null ? null : new Date(row.next_attempt_at),
        run: row.run,
        runAttempts: row.run_attempts,
        test: row.test,
        url: row.url,
        enabled: row.enabled,
        secretSealed: row.secret_sealed,
        rateLimitPerSecond: row.rate_limit_per_second,
      };
    });
  }

  /**
   * The worker's group commit: logs the attempts, updates their deliveries and the endpoints'
   * consecutive-failure counts, in one statement (one round trip, one implicit transaction).
   * Resolves, per result, with the endpoint's consecutive failures afterwards (null when the
   * endpoint was not touched: a test attempt, or an endpoint already at zero that succeeded again).
   * Lock order, shared with every disable: endpoint rows first (sorted), then deliveries. A delivery
   * skipped while its attempt was in flight stays skipped (no catch-up after a re-enable).
   */
  async recordAttempts(results: readonly AttemptResult[]): Promise<(number | null)[]> {
    const counters = failureCounterChanges(results);
    const counterIds = [...counters.keys()].sort();
    const rows = await this.db.query<{ id: string; consecutive_failures: number }>(sql.RECORD_ATTEMPTS, [
      counterIds,
      counterIds.map((id) => counters.get(id)!.reset),
      counterIds.map((id) => counters.get(id)!.n),
      ...attemptColumns(results.map((r) => r.attempt)),
      results.map((r) => r.deliveryCreatedAt.toISOString()),
      results.map((r) => r.endpointId),
      results.map((r) => r.status),
      results.map((r) => (r.nextAttemptAt === null ? null : r.nextAttemptAt.toISOString())),
    ]);
    const failuresById = new Map(rows.map((row) => [row.id, row.consecutive_failures]));
    return results.map((r) => (r.counts ? (failuresById.get(r.endpointId) ?? null) : null));
  }

  /** Marks a delivery that will not be sent (its endpoint is disabled) as skipped, if still pending. */
  async markSkipped(deliveryId: string, createdAt: Date): Promise<void> {
    await this.db.query(sql.MARK_SKIPPED, [deliveryId, createdAt.toISOString()]);
  }

  /**
   * Every pending delivery of the endpoint becomes `skipped` (the endpoint is being disabled: events
   * of the disabled period are never delivered). Pass the disabling transaction as `tx`, after the
   * endpoint row's update (lock order: endpoint, then deliveries). Resolves with how many changed.
   */
  async skipPendingOf(endpointId: string, tx: SqlRunner = this.db): Promise<number> {
    const rows = await tx.query<{ n: number }>(sql.SKIP_PENDING_OF_ENDPOINT, [endpointId]);
    return rows[0]?.n ?? 0;
  }

  /**
   * Puts deliveries of `endpointId` back to `pending` (Replay: any status; recover: pass
   * `onlyStatus: "failed"`), only while the endpoint is enabled; returns those that changed, with
   * their previous state. The caller queues them (same deliveryId, same bytes).
   */
  async requeue(endpointId: string, deliveryIds: readonly string[], options: { onlyStatus?: LogDeliveryStatus } = {}): Promise<RequeuedDelivery[]> {
    if (deliveryIds.length === 0) return [];
    const times = deliveryIds.map((id) => uuidV7Time(id)?.toISOString() ?? null);
    const statement = times.every((t) => t !== null) ? sql.REQUEUE_TIMED : sql.REQUEUE;
    const rows = await this.db.query<{
      id: string;
      run: number;
      prev_status: string;
      prev_next: Date | null;
      prev_updated: Date;
      prev_run: number;
      prev_run_attempts: number;
      updated_at: Date;
    }>(statement, [
      endpointId,
      [...deliveryIds],
      times,
      options.onlyStatus ?? null,
    ]);
    return rows.map((row) => ({
      deliveryId: row.id,
      endpointId,
      run: row.run,
      previous: {
        status: row.prev_status as LogDeliveryStatus,
        nextAttemptAt: row.prev_next === null ? null : new Date(row.prev_next),
        updatedAt: new Date(row.prev_updated),
        run: row.prev_run,
        runAttempts: row.prev_run_attempts,
      },
      requeuedAt: new Date(row.updated_at),
    }));
  }

  /**
   * The schedule of record, one page at a time: pending deliveries due at or before `dueBy` (null:
   * all of them, whenever due), in due order after `after` (exclusive; null from the start). The
   * reconciler walks it to queue again whatever has no job in Redis.
   */
  async pendingDue(dueBy: Date | null, after: ScheduleCursor | null, limit: number): Promise<ScheduledDelivery[]> {
    const rows = await this.db.query<{ id: string; endpoint_id: string; run: number; next_attempt_at: Date }>(sql.PENDING_DUE, [
      dueBy === null ? "infinity" : dueBy.toISOString(),
      after === null ? "-infinity" : after.nextAttemptAt.toISOString(),
      after === null ? "00000000-0000-0000-0000-000000000000" : after.deliveryId,
      limit,
    ]);
    return rows.map((row) => ({ deliveryId: row.id, endpointId: row.endpoint_id, run: row.run, nextAttemptAt: new Date(row.next_attempt_at) }));
  }

  /** Undoes {@link requeue}s whose jobs could not be queued, for each delivery nothing touched since. */
  async restore(requeued: RequeuedDelivery | readonly RequeuedDelivery[]): Promise<void> {
    const list: readonly RequeuedDelivery[] = Array.isArray(requeued) ? requeued : [requeued as RequeuedDelivery];
    if (list.length === 0) return;
    const times = list.map((r) => uuidV7Time(r.deliveryId)?.toISOString() ?? null);
    await this.db.query(times.every((t) => t !== null) ? sql.RESTORE_TIMED : sql.RESTORE, [
      list.map((r) => r.deliveryId),
      times,
      list.map((r) => r.requeuedAt.toISOString()),
      list.map((r) => r.previous.status),
      list.map((r) => (r.previous.nextAttemptAt === null ? null : r.previous.nextAttemptAt.toISOString())),
      list.map((r) => r.previous.updatedAt.toISOString()),
      list.map((r) => r.previous.run),
      list.map((r) => r.previous.runAttempts),
    ]);
  }
}

/** A new event row id (webhook_events.id). */
export const newEventRowId = (): string => randomUUID();

/** Inserts pending deliveries; says how many were, and which endpoints were gone (their rows left out). */
async function insertDeliveries(db: SqlRunner, rows: readonly NewDelivery[], ignoreExisting: boolean): Promise<{ inserted: number; gone: Set<string> }> {
  if (rows.length === 0) return { inserted: 0, gone: new Set() };
  const result = await db.query<{ n: number; gone: string[] }>(
    ignoreExisting ? sql.INSERT_DELIVERIES_IGNORING_EXISTING : sql.INSERT_DELIVERIES,
    deliveryColumns(rows, new Date()),
  );
  return { inserted: result[0]?.n ?? 0, gone: new Set(result[0]?.gone ?? []) };
}

/** New deliveries as the nine parallel column arrays the statements unnest (log-statements.ts, `deliveryValues`). */
function deliveryColumns(rows: readonly NewDelivery[], now: Date): unknown[] {
  return [
    rows.map((r) => r.id),
    rows.map((r) => r.endpointId),
    rows.map((r) => r.worldId),
    rows.map((r) => r.event?.rowId ?? null),
    rows.map((r) => r.event?.producerId ?? null),
    rows.map((r) => r.type),
    // Bodies travel as base64 text decoded by PostgreSQL: the stored bytes are exactly these.
    rows.map((r) => r.body.toString("base64")),
    rows.map((r) => deliveryCreatedAt(r.id, now).toISOString()),
    rows.map((r) => r.test ?? false),
  ];
}

interface WorldEndpointRow {
  id: string;
  world_slug: string;
  org_slug: string;
  custom_domain: string | null;
  endpoint_id: string | null;
  api_version: string | null;
  subscriptions: string[] | null;
}

/** The rows of {@link sql.RESOLVE_AND_LOCK_EVENTS} as worlds with their endpoints. */
function intakeWorlds(rows: readonly WorldEndpointRow[]): IntakeWorld[] {
  const byId = new Map<string, IntakeWorld>();
  for (const row of rows) {
    let world = byId.get(row.id);
    if (!world) {
      world = { id: row.id, organizationSlug: row.org_slug, worldSlug: row.world_slug, customDomain: row.custom_domain, endpoints: [] };
      byId.set(row.id, world);
    }
    if (row.endpoint_id !== null) world.endpoints.push({ id: row.endpoint_id, apiVersion: row.api_version as string, subscriptions: row.subscriptions ?? [] });
  }
  return [...byId.values()];
}

/** Ids whose time is known (UUIDv7: one partition) and the others (older v4 ids: every partition). */
function splitByIdTime(ids: readonly string[]): [{ id: string; at: string }[], string[]] {
  const timed: { id: string; at: string }[] = [];
  const untimed: string[] = [];
  for (const id of ids) {
    const at = uuidV7Time(id);
    if (at === null) untimed.push(id);
    else timed.push({ id, at: at.toISOString() });
  }
  return [timed, untimed];
}

/** Attempts as the 14 parallel column arrays the statements unnest (order: see log-statements.ts); `errorDetail` is never stored. */
function attemptColumns(attempts: readonly AttemptRecord[]): unknown[][] {
  return [
    attempts.map((x) => x.id),
    attempts.map((x) => x.deliveryId),
    attempts.map((x) => x.attemptNumber),
    attempts.map((x) => x.trigger),
    attempts.map((x) => x.startedAt.toISOString()),
    attempts.map((x) => JSON.stringify(x.requestHeaders)),
    attempts.map((x) => x.responseStatus),
    attempts.map((x) => (x.responseHeaders === null ? null : JSON.stringify(x.responseHeaders))),
    attempts.map((x) => x.responseBody),
    attempts.map((x) => x.responseBodyTruncated),
    attempts.map((x) => x.durationMs),
    attempts.map((x) => x.errorKind),
    attempts.map((x) => x.error),
    attempts.map((x) => x.verdict),
  ];
}

/**
 * Per endpoint, how a batch of attempts (in completion order) moves the consecutive-failure
 * count: after a success it restarts from the failures that followed it (`reset`), otherwise
 * every failure adds one.
 */
export function failureCounterChanges(results: readonly AttemptResult[]): Map<string, { reset: boolean; n: number }> {
  const changes = new Map<string, { reset: boolean; n: number }>();
  for (const result of results) {
    if (!result.counts) continue;
    const change = changes.get(result.endpointId) ?? { reset: false, n: 0 };
    if (result.succeeded) {
      change.reset = true;
      change.n = 0;
    } else {
      change.n += 1;
    }
    changes.set(result.endpointId, change);
  }
  return changes;
}
