/**
 * Reads of the delivery log for admin-api and the dashboard: an endpoint's deliveries (filtered,
 * keyset-paginated, newest first), one delivery with its attempts, and the endpoint's 24 h stats
 * from the `endpoint_stats` rollup (written by the log's statements as they change what it counts,
 * never computed by scanning the log). Lookups by deliveryId name the partition the UUIDv7 id points to.
 */
import type { AttemptRecord } from "@vw/webhook-core";
import type { CreationWindow, LogDeliveryStatus, WindowCursor } from "./log-types.js";
import type { SqlRunner } from "./sql-runner.js";
import { uuidV7Time } from "./uuid-v7.js";

/** A delivery as the history lists it. */
export interface DeliverySummary {
  id: string;
  endpointId: string;
  type: string;
  test: boolean;
  status: LogDeliveryStatus;
  attemptCount: number;
  lastStatus: number | null;
  nextAttemptAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /** The producer's id of the event it carries; null for tests, analytics batches and hook calls. */
  eventId: string | null;
  /** Why its next attempt is later than the retry schedule (the receiver's Retry-After), while pending; else null. */
  waitReason: string | null;
}

/** One delivery with its body and every attempt, oldest first. */
export interface DeliveryDetail extends DeliverySummary {
  body: Buffer;
  attempts: AttemptRecord[];
}

/** Filters of {@link DeliveryHistory.list}; all optional. `since` inclusive, `until` exclusive. */
export interface DeliveryFilter {
  status?: LogDeliveryStatus;
  type?: string;
  since?: Date;
  until?: Date;
  /** The producer's event id. */
  eventId?: string;
}

/** An endpoint's figures over a window (see {@link DeliveryHistory.stats}). */
export interface EndpointStatsSummary {
  since: Date;
  until: Date;
  deliveries: { total: number; delivered: number; failed: number; pending: number; skipped: number };
  attempts: { total: number; succeeded: number; failed: number };
  /** Succeeded attempts over all attempts; null when there was no attempt. */
  successRate: number | null;
  /** Attempt durations (ms), from the fixed-bucket histogram (linear within a bucket); null when no attempt. */
  latencyMs: { p50: number; p99: number } | null;
  lastAttempt: { at: Date; status: number | null; outcome: string } | null;
  /**
   * Attempts per clock hour (UTC), oldest first, every hour of the window present (zeros too):
   * the 25 hours from the one holding `since` (counted from `since`) to the one holding `until`.
   * They add up to `attempts`.
   */
  attemptsByHour: { hour: Date; succeeded: number; failed: number }[];
}

interface SummaryRow {
  id: string;
  endpoint_id: string;
  type: string;
  test: boolean;
  status: string;
  attempt_count: number;
  last_status: number | null;
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
  event_producer_id: string | null;
  wait_reason: string | null;
}

/**
 * A delivery's summary from `d` (webhook_deliveries), `s` (its state row, if any: none means
 * delivered) and `a` (its attempts' count, last status and end, see {@link ATTEMPTS_OF_D}).
 */
const SUMMARY_COLUMNS = `d.id, d.endpoint_id, d.type, d.test, COALESCE(s.status, 'delivered') AS status,
  COALESCE(s.attempt_count, a.n) AS attempt_count, CASE WHEN s.delivery_id IS NULL THEN a.last ELSE s.last_status END AS last_status,
  s.due_at AS next_attempt_at, d.created_at, COALESCE(s.updated_at, a.last_at, d.created_at) AS updated_at, d.event_producer_id, s.wait_reason`;

/** The attempts of delivery `d`, summed up as `a` (one probe of its partition's attempts index). */
const ATTEMPTS_OF_D = `LEFT JOIN LATERAL (
    SELECT count(*)::int AS n, (array_agg(x.response_status ORDER BY x.started_at DESC, x.attempt_number DESC))[1] AS last,
           max(x.started_at + x.duration_ms * interval '1 millisecond') AS last_at
    FROM delivery_attempts x WHERE x.delivery_id = d.id AND x.delivery_created_at = d.created_at) a ON true`;

/** The statuses a state row holds (a delivered delivery has none). */
const STATE_STATUSES: readonly LogDeliveryStatus[] = ["pending", "failed", "skipped"];

/** 24 hours, the stats window. */
export const STATS_WINDOW_MS = 24 * 3600_000;

/** See the file comment. */
export class DeliveryHistory {
  constructor(private readonly db: SqlRunner) {}

  /**
   * Deliveries of the endpoint matching `filter`, newest first (created_at desc, then id desc), at
   * most `limit`; `after` is the last delivery of the previous page (keyset: a row changing status
   * between two pages is neither skipped nor repeated). Resolves null when `after` is not a
   * delivery of this endpoint (a bad cursor, or a delivery dropped by retention since).
   */
  async list(endpointId: string, filter: DeliveryFilter, page: { limit: number; after?: string }): Promise<DeliverySummary[] | null> {
    // Pending, failed and skipped deliveries are found through their state rows (few, indexed by
    // status); the others by walking the endpoint's deliveries newest first.
    const byState = filter.status !== undefined && STATE_STATUSES.includes(filter.status);
    const key = byState ? "s" : "d";
    const values: unknown[] = [endpointId];
    const where = [`${key}.endpoint_id = $1::uuid`];
    const add = (condition: (p: string) => string, value: unknown) => {
      values.push(value);
      where.push(condition(`$${values.length}`));
    };
    if (filter.status !== undefined) {
      if (byState) add((p) => `s.status = ${p}::text`, filter.status);
      else where.push("s.delivery_id IS NULL");
    }
    if (filter.type !== undefined) add((p) => `d.type = ${p}::text`, filter.type);
    if (filter.since !== undefined) add((p) => `${key}.created_at >= ${p}::timestamptz`, filter.since.toISOString());
    if (filter.until !== undefined) add((p) => `${key}.created_at < ${p}::timestamptz`, filter.until.toISOString());
    if (filter.eventId !== undefined) add((p) => `d.event_producer_id = ${p}::text`, filter.eventId);
    if (page.after !== undefined) {
      const cursor = await this.find(endpointId, page.after);
      if (cursor === null) return null;
      values.push(cursor.createdAt.toISOString(), cursor.id);
      const [at, id] = [`$${values.length - 1}`, `$${values.length}`];
      const idColumn = byState ? "s.delivery_id" : "d.id";
      where.push(`${key}.created_at <= ${at}::timestamptz AND (${key}.created_at < ${at}::timestamptz OR ${idColumn} < ${id}::uuid)`);
    }
    values.push(page.limit);
    const order = byState ? "s.created_at DESC, s.delivery_id DESC" : "d.created_at DESC, d.id DESC";
    // An event id matches a handful of rows: fenced (OFFSET 0) so PostgreSQL finds them through the
    // (endpoint_id, event_producer_id) index and sorts them, instead of walking the endpoint's
    // whole history in created_at order and filtering (seconds for an endpoint with 1M deliveries).
    const from = byState
      ? "delivery_states s JOIN webhook_deliveries d ON d.id = s.delivery_id AND d.created_at = s.created_at"
      : filter.eventId === undefined
        ? "webhook_deliveries d LEFT JOIN delivery_states s ON s.delivery_id = d.id"
        : `(SELECT * FROM webhook_deliveries WHERE endpoint_id = $1::uuid AND event_producer_id = $${values.indexOf(filter.eventId) + 1}::text OFFSET 0) d
           LEFT JOIN delivery_states s ON s.delivery_id = d.id`;
    const text = `SELECT ${SUMMARY_COLUMNS} FROM ${from} ${ATTEMPTS_OF_D}
      WHERE ${where.join(" AND ")} ORDER BY ${order} LIMIT $${values.length}::int`;
    const name = `dh2-list-${key}-${where.map((w) => w.split(" ")[0]).join("-")}${filter.eventId === undefined ? "" : "-fenced"}`;
    const rows = await this.db.query<SummaryRow>({ name, text }, values);
    return rows.map(toSummary);
  }

  /** One delivery of the endpoint (one partition for a UUIDv7 id), or null. */
  async find(endpointId: string, deliveryId: string): Promise<DeliverySummary | null> {
    const rows = await this.byId<SummaryRow>(endpointId, deliveryId, SUMMARY_COLUMNS);
    return rows[0] === undefined ? null : toSummary(rows[0]);
  }

  /** One delivery of the endpoint with its body and attempts (oldest first), or null. */
  async get(endpointId: string, deliveryId: string): Promise<DeliveryDetail | null> {
    const rows = await this.byId<SummaryRow & { body: Buffer | Uint8Array }>(endpointId, deliveryId, `${SUMMARY_COLUMNS}, d.body`);
    const row = rows[0];
    if (row === undefined) return null;
    const attempts = await this.db.query<AttemptRow>(
      {
        name: "dh-attempts",
        text: `SELECT id, delivery_id, attempt_number, trigger, started_at, request_headers, response_status, response_headers, response_body,
                      response_body_truncated, duration_ms, error_kind, error, verdict
               FROM delivery_attempts WHERE delivery_id = $1::uuid AND delivery_created_at = $2::timestamptz
               ORDER BY started_at, attempt_number`,
      },
      [row.id, new Date(row.created_at).toISOString()],
    );
    return { ...toSummary(row), body: Buffer.from(row.body), attempts: attempts.map(toAttempt) };
  }

  /**
   * The figures of one endpoint, or of several together (a world's), over the last 24 h before
   * `now`, from the rollup: deliveries created in the window by current status, attempts started
   * in it (in total and per hour), their latency percentiles and the last one. The window starts
   * at the 5-minute bucket holding `now - 24h` (`since` says where). One statement, reading at
   * most 288 buckets x writing backends per endpoint, whatever the log's volume.
   */
  async stats(endpointIds: string | readonly string[], now: Date = new Date()): Promise<EndpointStatsSummary> {
    const window = "endpoint_id = ANY($1::uuid[]) AND bucket >= vw_stats_bucket($2::timestamptz) AND bucket <= $3::timestamptz";
    const rows = await this.db.query<StatsRow>(
      {
        name: "dh-stats-v2",
        text: `SELECT vw_stats_bucket($2::timestamptz) AS since, vw_latency_bounds() AS bounds,
            COALESCE(sum(pending), 0)::int AS pending, COALESCE(sum(delivered), 0)::int AS delivered,
            COALESCE(sum(failed), 0)::int AS failed, COALESCE(sum(skipped), 0)::int AS skipped,
            COALESCE(sum(attempts), 0)::int AS attempts, COALESCE(sum(attempts_succeeded), 0)::int AS succeeded,
            COALESCE(max(latency_max_ms), 0)::int AS max_ms,
            (SELECT array_agg(c ORDER BY k) FROM (
               SELECT k, sum(c)::int AS c FROM endpoint_stats x, unnest(x.latency_counts) WITH ORDINALITY AS u(c, k)
               WHERE ${window} GROUP BY k) h) AS counts,
            (SELECT json_build_object('at', last_attempt_at, 'status', last_attempt_status, 'outcome', last_attempt_outcome)
             FROM endpoint_stats y WHERE ${window} AND y.last_attempt_at IS NOT NULL ORDER BY y.last_attempt_at DESC LIMIT 1) AS last,
            (SELECT json_agg(json_build_object('hour', h.hour, 'attempts', COALESCE(p.attempts, 0), 'succeeded', COALESCE(p.succeeded, 0)) ORDER BY h.hour)
             FROM generate_series(date_trunc('hour', vw_stats_bucket($2::timestamptz), 'UTC'), date_trunc('hour', $3::timestamptz, 'UTC'), interval '1 hour') AS h(hour)
             LEFT JOIN (SELECT date_trunc('hour', bucket, 'UTC') AS hour, sum(attempts)::int AS attempts, sum(attempts_succeeded)::int AS succeeded
                        FROM endpoint_stats z WHERE ${window} GROUP BY 1) p ON p.hour = h.hour) AS hourly
          FROM endpoint_stats s WHERE ${window}`,
      },
      [typeof endpointIds === "string" ? [endpointIds] : endpointIds, new Date(now.getTime() - STATS_WINDOW_MS).toISOString(), now.toISOString()],
    );
    const r = rows[0]!;
    const total = r.pending + r.delivered + r.failed + r.skipped;
    const counts = r.counts ?? [];
    const last = typeof r.last === "string" ? (JSON.parse(r.last) as StatsRow["last"]) : r.last;
    const hourly = typeof r.hourly === "string" ? (JSON.parse(r.hourly) as StatsRow["hourly"]) : r.hourly;
    return {
      since: new Date(r.since),
      until: now,
      deliveries: { total, delivered: r.delivered, failed: r.failed, pending: r.pending, skipped: r.skipped },
      attempts: { total: r.attempts, succeeded: r.succeeded, failed: r.attempts - r.succeeded },
      successRate: r.attempts === 0 ? null : r.succeeded / r.attempts,
      latencyMs: r.attempts === 0 ? null : { p50: percentile(counts, r.bounds, r.max_ms, 0.5), p99: percentile(counts, r.bounds, r.max_ms, 0.99) },
      lastAttempt: last ? { at: new Date(last.at), status: last.status, outcome: last.outcome } : null,
      attemptsByHour: (hourly ?? []).map((h) => ({ hour: new Date(h.hour), succeeded: h.succeeded, failed: h.attempts - h.succeeded })),
    };
  }

  /** How many deliveries of the endpoint in `status` (not delivered) were created in [since, until) (recover's preview). */
  async countInWindow(endpointId: string, status: Exclude<LogDeliveryStatus, "delivered">, window: CreationWindow): Promise<number> {
    const rows = await this.db.query<{ n: number }>(
      {
        name: "dh2-count-window",
        text: `SELECT count(*)::int AS n FROM delivery_states
               WHERE endpoint_id = $1::uuid AND status = $2::text AND created_at >= $3::timestamptz AND created_at < $4::timestamptz`,
      },
      [endpointId, status, window.since.toISOString(), window.until.toISOString()],
    );
    return rows[0]?.n ?? 0;
  }

  /**
   * The next `limit` deliveries of the endpoint in `status` created in [since, until), oldest first
   * (created_at, then id), after `cursor` (recover walks a window in batches).
   */
  async pageInWindow(
    endpointId: string,
    status: Exclude<LogDeliveryStatus, "delivered">,
    window: CreationWindow,
    cursor: WindowCursor | null,
    limit: number,
  ): Promise<WindowCursor[]> {
    const rows = await this.db.query<{ id: string; created_at: Date }>(
      {
        name: "dh2-page-window",
        text: `SELECT delivery_id AS id, created_at FROM delivery_states
               WHERE endpoint_id = $1::uuid AND status = $2::text AND created_at >= $3::timestamptz AND created_at < $4::timestamptz
                 AND ($5::timestamptz IS NULL OR created_at > $5::timestamptz OR (created_at = $5::timestamptz AND delivery_id > $6::uuid))
               ORDER BY created_at, delivery_id LIMIT $7::int`,
      },
      [endpointId, status, window.since.toISOString(), window.until.toISOString(), cursor?.createdAt.toISOString() ?? null, cursor?.id ?? null, limit],
    );
    return rows.map((row) => ({ id: row.id, createdAt: new Date(row.created_at) }));
  }

  private byId<R>(endpointId: string, deliveryId: string, columns: string): Promise<R[]> {
    const at = uuidV7Time(deliveryId);
    if (at === null) {
      // An id written before partitioning (v4) has no time: one probe of each day's primary key.
      return this.db.query<R>(
        {
          name: `dh2-by-id-untimed-${columns.length}`,
          text: `SELECT ${columns} FROM webhook_deliveries d LEFT JOIN delivery_states s ON s.delivery_id = d.id ${ATTEMPTS_OF_D}
                 WHERE d.id = $1::uuid AND d.endpoint_id = $2::uuid`,
        },
        [deliveryId, endpointId],
      );
    }
    return this.db.query<R>(
      {
        name: `dh2-by-id-${columns.length}`,
        text: `SELECT ${columns} FROM webhook_deliveries d LEFT JOIN delivery_states s ON s.delivery_id = d.id ${ATTEMPTS_OF_D}
               WHERE d.id = $1::uuid AND d.created_at = $3::timestamptz AND d.endpoint_id = $2::uuid`,
      },
      [deliveryId, endpointId, at.toISOString()],
    );
  }
}

interface StatsRow {
  since: Date;
  bounds: number[];
  pending: number;
  delivered: number;
  failed: number;
  skipped: number;
  attempts: number;
  succeeded: number;
  max_ms: number;
  counts: number[] | null;
  last: { at: string; status: number | null; outcome: string } | null;
  hourly: { hour: string; attempts: number; succeeded: number }[] | null;
}

interface AttemptRow {
  id: string;
  delivery_id: string;
  attempt_number: number;
  trigger: string;
  started_at: Date;
  request_headers: Record<string, string>;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  response_body_truncated: boolean;
  duration_ms: number;
  error_kind: string | null;
  error: string | null;
  verdict: string;
}

/**
 * The `q` quantile of a histogram whose bucket i holds durations in [bounds[i-1], bounds[i])
 * (0 below the first bound, the observed maximum above the last), interpolated linearly inside
 * its bucket and never above the maximum.
 */
export function percentile(counts: readonly number[], bounds: readonly number[], maxMs: number, q: number): number {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i += 1) {
    const c = counts[i] ?? 0;
    if (c > 0 && seen + c >= rank) {
      const lo = i === 0 ? 0 : (bounds[i - 1] ?? maxMs);
      const hi = Math.min(bounds[i] ?? maxMs, maxMs);
      const value = lo + ((rank - seen) / c) * Math.max(0, hi - lo);
      return Math.round(Math.min(value, maxMs));
    }
    seen += c;
  }
  return maxMs;
}

function toSummary(row: SummaryRow): DeliverySummary {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    type: row.type,
    test: row.test,
    status: row.status as LogDeliveryStatus,
    attemptCount: row.attempt_count,
    lastStatus: row.last_status,
    nextAttemptAt: row.next_attempt_at === null ? null : new Date(row.next_attempt_at),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
    eventId: row.event_producer_id,
    waitReason: row.wait_reason,
  };
}

function toAttempt(row: AttemptRow): AttemptRecord {
  return {
    id: row.id,
    deliveryId: row.delivery_id,
    attemptNumber: row.attempt_number,
    trigger: row.trigger as AttemptRecord["trigger"],
    startedAt: new Date(row.started_at),
    requestHeaders: row.request_headers,
    responseStatus: row.response_status,
    responseHeaders: row.response_headers,
    responseBody: row.response_body,
    responseBodyTruncated: row.response_body_truncated,
    durationMs: row.duration_ms,
    errorKind: row.error_kind as AttemptRecord["errorKind"],
    error: row.error,
    verdict: row.verdict as AttemptRecord["verdict"],
  };
}
