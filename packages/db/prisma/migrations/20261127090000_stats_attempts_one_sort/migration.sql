-- The attempts' rollup into endpoint_stats, cheaper per worker commit (measured with pgbench on a
-- 33-attempt insert over 15 endpoints: the trigger's cost 0.40-0.45 ms -> 0.20-0.22 ms per statement).
-- Same rows, same values as 20261125200000_stats_attempts_single_pass:
-- - the histogram of an existing row is summed element by element in place, instead of through
--   vw_add_counts, a SQL function PostgreSQL cannot inline (it has a FROM) and so ran as its own
--   query for every (endpoint, bucket) row the statement updated, about 10 us each. A row the
--   deliveries' triggers created has an empty histogram, whose elements read NULL: COALESCE 0.
--   Every histogram has 21 counts (the 20 bounds of vw_latency_bounds() plus one), as built here.
-- - the last attempt of each group is marked by one window over the inserted rows (one sort),
--   instead of three ordered array_agg per group (three sorts of every group).
-- The body is an E'' string with every inner semicolon written \073 (Prisma's migration runner
-- splits the file on semicolons, see 20261122050000_hook_target_notify).
CREATE OR REPLACE FUNCTION vw_stats_attempts_inserted() RETURNS TRIGGER LANGUAGE plpgsql AS E'
BEGIN
  INSERT INTO endpoint_stats AS s (endpoint_id, bucket, shard, attempts, attempts_succeeded, latency_counts, latency_max_ms,
                                   last_attempt_at, last_attempt_status, last_attempt_outcome)
  SELECT endpoint_id, bucket, pg_backend_pid(), count(*)::int, count(*) FILTER (WHERE verdict = ''delivered'')::int,
         ARRAY[count(*) FILTER (WHERE lb = 1)::int,
                count(*) FILTER (WHERE lb = 2)::int,
                count(*) FILTER (WHERE lb = 3)::int,
                count(*) FILTER (WHERE lb = 4)::int,
                count(*) FILTER (WHERE lb = 5)::int,
                count(*) FILTER (WHERE lb = 6)::int,
                count(*) FILTER (WHERE lb = 7)::int,
                count(*) FILTER (WHERE lb = 8)::int,
                count(*) FILTER (WHERE lb = 9)::int,
                count(*) FILTER (WHERE lb = 10)::int,
                count(*) FILTER (WHERE lb = 11)::int,
                count(*) FILTER (WHERE lb = 12)::int,
                count(*) FILTER (WHERE lb = 13)::int,
                count(*) FILTER (WHERE lb = 14)::int,
                count(*) FILTER (WHERE lb = 15)::int,
                count(*) FILTER (WHERE lb = 16)::int,
                count(*) FILTER (WHERE lb = 17)::int,
                count(*) FILTER (WHERE lb = 18)::int,
                count(*) FILTER (WHERE lb = 19)::int,
                count(*) FILTER (WHERE lb = 20)::int,
                count(*) FILTER (WHERE lb = 21)::int],
         max(duration_ms),
         max(started_at) FILTER (WHERE rn = 1), max(response_status) FILTER (WHERE rn = 1), max(verdict) FILTER (WHERE rn = 1)
  FROM (SELECT endpoint_id, vw_stats_bucket(started_at) AS bucket, width_bucket(duration_ms, vw_latency_bounds()) + 1 AS lb,
               duration_ms, verdict, started_at, response_status,
               row_number() OVER (PARTITION BY endpoint_id, vw_stats_bucket(started_at) ORDER BY started_at DESC, attempt_number DESC) AS rn
        FROM new_rows) r
  GROUP BY endpoint_id, bucket
  ORDER BY 1, 2
  ON CONFLICT (endpoint_id, bucket, shard) DO UPDATE SET
    attempts = s.attempts + EXCLUDED.attempts,
    attempts_succeeded = s.attempts_succeeded + EXCLUDED.attempts_succeeded,
    latency_counts = ARRAY[COALESCE(s.latency_counts[1], 0) + EXCLUDED.latency_counts[1], COALESCE(s.latency_counts[2], 0) + EXCLUDED.latency_counts[2], COALESCE(s.latency_counts[3], 0) + EXCLUDED.latency_counts[3],
                            COALESCE(s.latency_counts[4], 0) + EXCLUDED.latency_counts[4], COALESCE(s.latency_counts[5], 0) + EXCLUDED.latency_counts[5], COALESCE(s.latency_counts[6], 0) + EXCLUDED.latency_counts[6],
                            COALESCE(s.latency_counts[7], 0) + EXCLUDED.latency_counts[7], COALESCE(s.latency_counts[8], 0) + EXCLUDED.latency_counts[8], COALESCE(s.latency_counts[9], 0) + EXCLUDED.latency_counts[9],
                            COALESCE(s.latency_counts[10], 0) + EXCLUDED.latency_counts[10], COALESCE(s.latency_counts[11], 0) + EXCLUDED.latency_counts[11], COALESCE(s.latency_counts[12], 0) + EXCLUDED.latency_counts[12],
                            COALESCE(s.latency_counts[13], 0) + EXCLUDED.latency_counts[13], COALESCE(s.latency_counts[14], 0) + EXCLUDED.latency_counts[14], COALESCE(s.latency_counts[15], 0) + EXCLUDED.latency_counts[15],
                            COALESCE(s.latency_counts[16], 0) + EXCLUDED.latency_counts[16], COALESCE(s.latency_counts[17], 0) + EXCLUDED.latency_counts[17], COALESCE(s.latency_counts[18], 0) + EXCLUDED.latency_counts[18],
                            COALESCE(s.latency_counts[19], 0) + EXCLUDED.latency_counts[19], COALESCE(s.latency_counts[20], 0) + EXCLUDED.latency_counts[20], COALESCE(s.latency_counts[21], 0) + EXCLUDED.latency_counts[21]],
    latency_max_ms = GREATEST(s.latency_max_ms, EXCLUDED.latency_max_ms),
    last_attempt_at = CASE WHEN s.last_attempt_at IS NULL OR EXCLUDED.last_attempt_at >= s.last_attempt_at THEN EXCLUDED.last_attempt_at ELSE s.last_attempt_at END,
    last_attempt_status = CASE WHEN s.last_attempt_at IS NULL OR EXCLUDED.last_attempt_at >= s.last_attempt_at THEN EXCLUDED.last_attempt_status ELSE s.last_attempt_status END,
    last_attempt_outcome = CASE WHEN s.last_attempt_at IS NULL OR EXCLUDED.last_attempt_at >= s.last_attempt_at THEN EXCLUDED.last_attempt_outcome ELSE s.last_attempt_outcome END\073
  RETURN NULL\073
END ';

-- Nothing calls it any more.
DROP FUNCTION vw_add_counts(INTEGER[], INTEGER[]);
