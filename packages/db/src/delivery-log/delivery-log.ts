/**
 * The one owner of the delivery log: `webhook_events` (deduplication records),
 * `webhook_deliveries` (each delivery's bytes, written once), `delivery_states` (the state of a
 * delivery that is not delivered: the schedule of record) and `delivery_attempts`, with the
 * `endpoint_stats` rollup they feed. Every writer goes through it: event intake, the analytics
 * flush, the auth hook and the Test action create deliveries; the worker's drains claim them and
 * its group commit records attempts; Replay and recover put deliveries back to `pending`; endpoint
 * disables skip what is pending. Reads for admin-api are in {@link DeliveryHistory}; partitions and
 * retention in {@link LogPartitions}. Only this folder knows the tables' columns. It decides
 * nothing about a delivery's fate: the worker's fate function does, and this applies it.
 *
 * The partitioned tables are range-partitioned by day (see README "Delivery log"): a delivery's
 * partition is its `created_at`, the time inside its UUIDv7 id, and an attempt's is its
 * delivery's.
 */
import { randomUUID } from "node:crypto";
import type { AttemptRecord } from "@vw/webhook-core";
import type {
  AttemptApplication,
  ClaimedDelivery,
  DueEndpoint,
  FinishedDelivery,
  IntakeEvent,
  IntakeEventRef,
  IntakePlan,
  IntakeWorld,
  LogDeliveryStatus,
  NewDelivery,
} from "./log-types.js";
import type { SqlRunner } from "./sql-runner.js";
import * as sql from "./log-statements.js";
import { uuidV7, uuidV7Time } from "./uuid-v7.js";

/** A new deliveryId: a UUIDv7 of `now` (its time is the delivery's creation time). */
export const newDeliveryId = (now: Date = new Date()): string => uuidV7(now.getTime());

/** The creation time (partition key) of a delivery id: its UUIDv7 time, else `fallback`. */
export const deliveryCreatedAt = (id: string, fallback: Date = new Date()): Date => uuidV7Time(id) ?? fallback;

/** A new event row id (webhook_events.id). */
export const newEventRowId = (): string => randomUUID();

/** What {@link DeliveryLog.storeIntake} stored. */
export interface StoredIntake {
  /** The events seen for the first time (the others are duplicates). */
  fresh: IntakeEvent[];
  /** The deliveries created: those of fresh events whose endpoints are still there. */
  created: NewDelivery[];
}

interface ClaimRow {
  delivery_id: string;
  created_at: Date;
  endpoint_id: string;
  due_at: Date;
  run: number;
  run_attempts: number;
  attempt_count: number;
  body: Buffer | Uint8Array;
  test: boolean;
  trace: string | null;
  claimed_until: Date;
  lease: string;
  url: string;
  enabled: boolean;
  secret_sealed: string | null;
  rate_limit_per_second: number | null;
  headers_sealed: string | null;
}

/** See the file comment. */
export class DeliveryLog {
  constructor(private readonly db: SqlRunner) {}

  /** Runs `fn` in one transaction of the log's database (the intake's, with {@link resolveIntake} and {@link storeIntake}). */
  transaction<T>(fn: (tx: SqlRunner) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /**
   * The intake's first step, in the caller's transaction `tx`: the worlds `refs` name, with their
   * enabled endpoints. Worlds that do not exist are left out.
   */
  async resolveIntake(refs: readonly IntakeEventRef[], tx: SqlRunner): Promise<IntakeWorld[]> {
    const rows = await tx.query<WorldEndpointRow>(sql.RESOLVE_WORLDS, [refs.map((e) => e.organizationSlug), refs.map((e) => e.worldSlug)]);
    return intakeWorlds(rows);
  }

  /**
   * The intake's second step, in the same transaction: stores the events not stored yet
   * (deduplicated on the producer's id within the world, over the whole retention) and the
   * deliveries of those only, each pending and due at once. `plan.events` must come in one sorted
   * order of their (world, producer id), as every intake sorts them: concurrent intakes sharing
   * ids then wait for each other in that order, never in a cycle. A delivery whose endpoint was
   * deleted since {@link resolveIntake} is left out.
   */
  async storeIntake(plan: IntakePlan, createdAt: Date, tx: SqlRunner): Promise<StoredIntake> {
    const { events, deliveries } = plan;
    const [stored] = await tx.query<{ fresh: string[]; n: number; gone: string[] }>(sql.STORE_INTAKE, [
      events.map((e) => e.rowId),
      events.map((e) => e.worldId),
      events.map((e) => e.producerId),
      events.map((e) => e.type),
      events.map((e) => e.occurredAt),
      createdAt.toISOString(),
      ...deliveryColumns(deliveries, createdAt),
    ]);
    const ids = new Set(stored?.fresh ?? []);
    const gone = new Set(stored?.gone ?? []);
    return {
      fresh: events.filter((e) => ids.has(e.rowId)),
      created: deliveries.filter((d) => d.event !== undefined && ids.has(d.event.rowId) && !gone.has(d.endpointId)),
    };
  }

  /**
   * Creates pending deliveries, due at once, in one statement; with `ignoreExisting`, an id already
   * stored is left as it is (a writer retrying the same batch). Those of an endpoint deleted
   * meanwhile are left out. Resolves with how many were inserted.
   */
  async create(deliveries: readonly NewDelivery[], options: { ignoreExisting?: boolean } = {}): Promise<number> {
    if (deliveries.length === 0) return 0;
    const rows = await this.db.query<{ n: number }>(options.ignoreExisting ? sql.INSERT_DELIVERIES_IGNORING_EXISTING : sql.INSERT_DELIVERIES, deliveryColumns(deliveries, new Date()));
    return rows[0]?.n ?? 0;
  }

  /**
   * Deliveries whose only attempt is over (auth hook calls, Test sends), each with that attempt and
   * its final status (`delivered` when the attempt was, else `failed`), in ONE statement: no
   * delivery without its attempt. A delivery whose endpoint is gone meanwhile is left out.
   */
  async recordFinished(rows: readonly FinishedDelivery[]): Promise<void> {
    if (rows.length === 0) return;
    const createdAt = rows.map((r) => deliveryCreatedAt(r.delivery.id, r.attempt.startedAt).toISOString());
    await this.db.query(sql.RECORD_FINISHED, [
      rows.map((r) => r.delivery.id),
      rows.map((r) => r.delivery.endpointId),
      rows.map((r) => r.delivery.worldId),
      rows.map((r) => r.delivery.type),
      rows.map((r) => r.delivery.body.toString("base64")),
      rows.map((r) => r.test),
      rows.map((r) => (r.attempt.verdict === "delivered" ? "delivered" : "failed")),
      rows.map((r) => r.finishedAt.toISOString()),
      createdAt,
      ...attemptColumns(rows.map((r) => r.attempt)),
      createdAt,
      rows.map((r) => r.delivery.endpointId),
    ]);
  }

  /**
   * Claims up to `limit` due pending deliveries of each endpoint asked for, oldest due first, for
   * `leaseMs`: no other claim takes them until then (a drain that dies leaves them to the next one
   * after that). One statement for every request.
   */
  async claim(requests: readonly { endpointId: string; limit: number }[], leaseMs: number): Promise<ClaimedDelivery[]> {
    if (requests.length === 0) return [];
    const rows = await this.db.query<ClaimRow>(sql.CLAIM_DUE, [requests.map((r) => r.endpointId), requests.map((r) => r.limit), Math.ceil(leaseMs)]);
    return rows.map((row) => ({
      deliveryId: row.delivery_id,
      endpointId: row.endpoint_id,
      createdAt: new Date(row.created_at),
      dueAt: new Date(row.due_at),
      run: row.run,
      runAttempts: row.run_attempts,
      attemptCount: row.attempt_count,
      body: Buffer.from(row.body),
      test: row.test,
      trace: row.trace,
      claimedUntil: new Date(row.claimed_until),
      lease: row.lease,
      endpoint: { url: row.url, enabled: row.enabled, secretSealed: row.secret_sealed, rateLimitPerSecond: row.rate_limit_per_second, headersSealed: row.headers_sealed },
    }));
  }

  /**
   * The worker's group commit: logs the attempts and applies what each one's fate decided, to its
   * delivery and to its endpoint's consecutive-failure count, in one statement (one round trip,
   * one implicit transaction). Resolves with the consecutive failures afterwards of each endpoint
   * whose count changed.
   */
  async record(applications: readonly AttemptApplication[]): Promise<Map<string, number>> {
    if (applications.length === 0) return new Map();
    const counters = failureCounterChanges(applications);
    const counterIds = [...counters.keys()].sort();
    const rows = await this.db.query<{ id: string; consecutive_failures: number }>(sql.RECORD_ATTEMPTS, [
      counterIds,
      counterIds.map((id) => counters.get(id)!.reset),
      counterIds.map((id) => counters.get(id)!.n),
      ...attemptColumns(applications.map((a) => a.attempt)),
      applications.map((a) => a.deliveryCreatedAt.toISOString()),
      applications.map((a) => a.endpointId),
      applications.map((a) => a.becomes),
      applications.map((a) => (a.dueAt === null ? null : a.dueAt.toISOString())),
      applications.map((a) => a.waitReason),
      applications.map((a) => a.run),
    ]);
    return new Map(rows.map((row) => [row.id, row.consecutive_failures]));
  }

  /** The deliveries still pending among `deliveryIds` become `skipped` (their endpoint is disabled). */
  async skip(deliveryIds: readonly string[]): Promise<number> {
    if (deliveryIds.length === 0) return 0;
    const rows = await this.db.query<{ n: number }>(sql.SKIP_DELIVERIES, [[...deliveryIds]]);
    return rows[0]?.n ?? 0;
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
   * Puts deliveries of `endpointId` back to `pending`, due at once, in a new run (Replay: any
   * status; recover: pass `onlyStatus: "failed"`), only while the endpoint is enabled; resolves
   * with the ids put back. The caller wakes the endpoint; should that fail, the reconciler finds
   * them due in PostgreSQL.
   */
  async requeue(endpointId: string, deliveryIds: readonly string[], options: { onlyStatus?: LogDeliveryStatus } = {}): Promise<string[]> {
    const timed = deliveryIds.flatMap((id) => {
      const at = uuidV7Time(id);
      return at === null ? [] : [{ id, at: at.toISOString() }];
    });
    // Ids written before partitioning (v4) have no time: their creation time is looked up.
    const untimed = deliveryIds.filter((id) => uuidV7Time(id) === null);
    if (untimed.length > 0) {
      const found = await this.db.query<{ id: string; created_at: Date }>(sql.CREATION_TIMES, [endpointId, untimed]);
      timed.push(...found.map((row) => ({ id: row.id, at: new Date(row.created_at).toISOString() })));
    }
    if (timed.length === 0) return [];
    const rows = await this.db.query<{ id: string }>(sql.REQUEUE, [endpointId, timed.map((t) => t.id), timed.map((t) => t.at), options.onlyStatus ?? null]);
    return rows.map((row) => row.id);
  }

  /** Gives back claims (a worker shutting down with claims it will not attempt). */
  async releaseClaims(claims: readonly Pick<ClaimedDelivery, "deliveryId" | "lease">[]): Promise<void> {
    if (claims.length === 0) return;
    await this.db.query(sql.RELEASE_CLAIMS, [claims.map((c) => c.deliveryId), claims.map((c) => c.lease)]);
  }

  /**
   * Renews claims still held with their lease for `leaseMs` more; resolves with the new lease of
   * each renewed one (a claim that expired and was taken again by another drain is left out).
   */
  async renewClaims(claims: readonly Pick<ClaimedDelivery, "deliveryId" | "lease">[], leaseMs: number): Promise<Map<string, { claimedUntil: Date; lease: string }>> {
    if (claims.length === 0) return new Map();
    const rows = await this.db.query<{ delivery_id: string; claimed_until: Date; lease: string }>(sql.RENEW_CLAIMS, [
      claims.map((c) => c.deliveryId),
      claims.map((c) => c.lease),
      Math.ceil(leaseMs),
    ]);
    return new Map(rows.map((row) => [row.delivery_id, { claimedUntil: new Date(row.claimed_until), lease: row.lease }]));
  }

  /**
   * Every endpoint with pending deliveries due later than now, with each distinct due time among
   * them (the reconciler's rebuild: a timer for every retry, not only the earliest of each endpoint).
   */
  async pendingLater(): Promise<DueEndpoint[]> {
    const rows = await this.db.query<{ endpoint_id: string; due_at: Date }>(sql.PENDING_LATER, []);
    return rows.map((row) => ({ endpointId: row.endpoint_id, dueAt: new Date(row.due_at) }));
  }

  /** Every endpoint with pending deliveries, with the earliest due time among them (the reconciler's sweep). */
  async dueEndpoints(): Promise<DueEndpoint[]> {
    const rows = await this.db.query<{ endpoint_id: string; due_at: Date }>(sql.DUE_ENDPOINTS, []);
    return rows.map((row) => ({ endpointId: row.endpoint_id, dueAt: new Date(row.due_at) }));
  }
}

/** New deliveries as the ten parallel column arrays the statements unnest (log-statements.ts, `deliveryValues`). */
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
    rows.map((r) => r.trace ?? null),
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

/** The rows of {@link sql.RESOLVE_WORLDS} as worlds with their endpoints. */
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
 * count: after a reset it restarts from the increments that followed it, otherwise every
 * increment adds one.
 */
export function failureCounterChanges(applications: readonly Pick<AttemptApplication, "endpointId" | "failures">[]): Map<string, { reset: boolean; n: number }> {
  const changes = new Map<string, { reset: boolean; n: number }>();
  for (const a of applications) {
    if (a.failures === "none") continue;
    const change = changes.get(a.endpointId) ?? { reset: false, n: 0 };
    if (a.failures === "reset") {
      change.reset = true;
      change.n = 0;
    } else {
      change.n += 1;
    }
    changes.set(a.endpointId, change);
  }
  return changes;
}
