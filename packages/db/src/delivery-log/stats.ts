/**
 * The `endpoint_stats` rollup as a part of the statements that change what it counts: each adds
 * its own change, from rows it already holds, in one upsert. Per (endpoint, 5-minute bucket,
 * writing backend): deliveries by status (the bucket of their creation), and attempts (the bucket
 * of their start) with a latency histogram (one count per bound of `vw_latency_bounds()`, plus one
 * above) and the latest attempt. The backend's pid as `shard` keeps concurrent writers off each
 * other's rows; the history sums the shards.
 *
 * A statement may upsert a row only once, so a statement's status changes and attempts go into
 * one upsert, grouped by (endpoint, bucket). Deliveries older than the two days the rollup keeps
 * (a Replay of last month's) change nothing in it.
 */

/** Latency histogram slots: the 20 bounds of `vw_latency_bounds()` plus one above the last. */
const LATENCY_SLOTS = 21;

/**
 * Rows of attempt statistics from relation `rel` (attempt columns and `endpoint_id`), in the shape
 * {@link upsertStats} takes (zero status deltas).
 */
export const attemptStatsRows = (rel: string): string =>
  `SELECT endpoint_id, started_at AS at_time, 0 AS p, 0 AS d, 0 AS f, 0 AS k, 1 AS a, (verdict = 'delivered')::int AS ok,
          width_bucket(duration_ms, vw_latency_bounds()) + 1 AS lb, duration_ms AS ms, started_at AS last_at, attempt_number AS last_n,
          response_status AS last_status, verdict AS last_outcome
   FROM ${rel}`;

/**
 * The upsert of status changes `statusRows` (columns `endpoint_id, created_at, p, d, f, k`: the
 * change of pending, delivered, failed and skipped) and, optionally, attempt rows (see
 * {@link attemptStatsRows}) into `endpoint_stats`, as the body of a data-modifying CTE.
 */
export function upsertStats(statusRows: string, attemptRows?: string): string {
  const status = `SELECT endpoint_id, created_at AS at_time, p, d, f, k, 0 AS a, 0 AS ok, NULL::int AS lb, NULL::int AS ms,
                         NULL::timestamptz AS last_at, NULL::int AS last_n, NULL::int AS last_status, NULL::text AS last_outcome
                  FROM (${statusRows}) sr`;
  const rows = attemptRows === undefined ? status : `${status} UNION ALL ${attemptRows}`;
  const slots = Array.from({ length: LATENCY_SLOTS }, (_, i) => i + 1);
  const histogram = slots.map((i) => `count(*) FILTER (WHERE lb = ${i})::int`).join(", ");
  // Summed element by element in place: a SQL function over the arrays would run as a query of its
  // own for every row updated. A row's histogram is empty until its first attempt.
  const addHistogram = slots.map((i) => `COALESCE(s.latency_counts[${i}], 0) + EXCLUDED.latency_counts[${i}]`).join(", ");
  const newer = "EXCLUDED.last_attempt_at IS NOT NULL AND (s.last_attempt_at IS NULL OR EXCLUDED.last_attempt_at >= s.last_attempt_at)";
  return `INSERT INTO endpoint_stats AS s (endpoint_id, bucket, shard, pending, delivered, failed, skipped, attempts, attempts_succeeded,
                                      latency_counts, latency_max_ms, last_attempt_at, last_attempt_status, last_attempt_outcome)
    SELECT endpoint_id, bucket, pg_backend_pid(), sum(p)::int, sum(d)::int, sum(f)::int, sum(k)::int, sum(a)::int, sum(ok)::int,
           ARRAY[${histogram}], COALESCE(max(ms), 0),
           max(last_at) FILTER (WHERE rn = 1), max(last_status) FILTER (WHERE rn = 1), max(last_outcome) FILTER (WHERE rn = 1)
    FROM (SELECT x.*, vw_stats_bucket(at_time) AS bucket,
                 row_number() OVER (PARTITION BY endpoint_id, vw_stats_bucket(at_time) ORDER BY last_at DESC NULLS LAST, last_n DESC) AS rn
          FROM (${rows}) x WHERE at_time >= now() - interval '2 days') r
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (endpoint_id, bucket, shard) DO UPDATE SET
      pending = s.pending + EXCLUDED.pending, delivered = s.delivered + EXCLUDED.delivered,
      failed = s.failed + EXCLUDED.failed, skipped = s.skipped + EXCLUDED.skipped,
      attempts = s.attempts + EXCLUDED.attempts, attempts_succeeded = s.attempts_succeeded + EXCLUDED.attempts_succeeded,
      latency_counts = CASE WHEN EXCLUDED.attempts = 0 THEN s.latency_counts ELSE ARRAY[${addHistogram}] END,
      latency_max_ms = GREATEST(s.latency_max_ms, EXCLUDED.latency_max_ms),
      last_attempt_at = CASE WHEN ${newer} THEN EXCLUDED.last_attempt_at ELSE s.last_attempt_at END,
      last_attempt_status = CASE WHEN ${newer} THEN EXCLUDED.last_attempt_status ELSE s.last_attempt_status END,
      last_attempt_outcome = CASE WHEN ${newer} THEN EXCLUDED.last_attempt_outcome ELSE s.last_attempt_outcome END
    RETURNING 1`;
}
