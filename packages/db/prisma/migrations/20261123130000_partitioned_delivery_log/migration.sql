-- The delivery log (webhook_events, webhook_deliveries, delivery_attempts) becomes range-partitioned
-- by day (UTC) with no DEFAULT partition, so retention drops whole partitions instead of deleting
-- rows, per-endpoint rollups (endpoint_stats) are maintained by statement triggers as rows are
-- written. Existing rows are copied into the new tables: an upgrade keeps its history.
-- Function bodies are E'' strings with every inner semicolon written \073: Prisma's migration runner
-- (driver adapter) splits a file at every semicolon, even inside quotes, $$ or comments.
-- See packages/db/README.md ("Delivery log") for the layout and its reasons.

-- 1. Move the unpartitioned tables aside (their constraint and index names are needed again).
ALTER TABLE "delivery_attempts" DROP CONSTRAINT "delivery_attempts_delivery_id_fkey";
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_event_id_fkey";
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_endpoint_id_fkey";
ALTER TABLE "webhook_events" DROP CONSTRAINT "webhook_events_world_id_fkey";
ALTER TABLE "webhook_events" RENAME TO "legacy_webhook_events";
ALTER TABLE "webhook_deliveries" RENAME TO "legacy_webhook_deliveries";
ALTER TABLE "delivery_attempts" RENAME TO "legacy_delivery_attempts";
ALTER TABLE "legacy_webhook_events" RENAME CONSTRAINT "webhook_events_pkey" TO "legacy_webhook_events_pkey";
ALTER TABLE "legacy_webhook_deliveries" RENAME CONSTRAINT "webhook_deliveries_pkey" TO "legacy_webhook_deliveries_pkey";
ALTER TABLE "legacy_delivery_attempts" RENAME CONSTRAINT "delivery_attempts_pkey" TO "legacy_delivery_attempts_pkey";
DROP INDEX "webhook_events_created_at_idx";
DROP INDEX "webhook_events_world_id_producer_id_key";
DROP INDEX "webhook_deliveries_endpoint_id_created_at_id_idx";
DROP INDEX "webhook_deliveries_created_at_idx";
DROP INDEX "webhook_deliveries_event_id_idx";
DROP INDEX "delivery_attempts_delivery_id_started_at_idx";

-- 2. The partitioned tables. Primary keys include the partition key (PostgreSQL requires it),
-- ids are unique anyway (UUIDs). No foreign keys between the three: a key referencing a
-- partitioned table would make every partition detach check its referencing rows.
CREATE TABLE "webhook_events" (
    "id" UUID NOT NULL,
    "world_id" UUID NOT NULL,
    "producer_id" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "occurred_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "webhook_events_pkey" PRIMARY KEY ("id", "created_at")
) PARTITION BY RANGE ("created_at");

CREATE TABLE "webhook_deliveries" (
    "id" UUID NOT NULL,
    "endpoint_id" UUID NOT NULL,
    "world_id" UUID NOT NULL,
    "event_id" UUID,
    "event_producer_id" TEXT,
    "type" TEXT NOT NULL,
    "body" BYTEA NOT NULL,
    "test" BOOLEAN NOT NULL DEFAULT false,
    "status" TEXT NOT NULL,
    "attempt_count" INTEGER NOT NULL DEFAULT 0,
    "last_status" INTEGER,
    "next_attempt_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id", "created_at")
) PARTITION BY RANGE ("created_at");

CREATE TABLE "delivery_attempts" (
    "id" UUID NOT NULL,
    "delivery_id" UUID NOT NULL,
    "delivery_created_at" TIMESTAMPTZ(3) NOT NULL,
    "endpoint_id" UUID NOT NULL,
    "attempt_number" INTEGER NOT NULL,
    "trigger" TEXT NOT NULL,
    "started_at" TIMESTAMPTZ(3) NOT NULL,
    "request_headers" JSONB NOT NULL,
    "response_status" INTEGER,
    "response_headers" JSONB,
    "response_body" TEXT,
    "response_body_truncated" BOOLEAN NOT NULL DEFAULT false,
    "duration_ms" INTEGER NOT NULL,
    "error_kind" TEXT,
    "error" TEXT,
    "verdict" TEXT NOT NULL,
    CONSTRAINT "delivery_attempts_pkey" PRIMARY KEY ("id", "delivery_created_at")
) PARTITION BY RANGE ("delivery_created_at");

CREATE INDEX "webhook_events_world_id_producer_id_idx" ON "webhook_events"("world_id", "producer_id");
CREATE INDEX "webhook_deliveries_endpoint_id_created_at_id_idx" ON "webhook_deliveries"("endpoint_id", "created_at" DESC, "id" DESC);
CREATE INDEX "webhook_deliveries_event_id_idx" ON "webhook_deliveries"("event_id");
CREATE INDEX "webhook_deliveries_endpoint_id_event_producer_id_idx" ON "webhook_deliveries"("endpoint_id", "event_producer_id");
CREATE INDEX "delivery_attempts_delivery_id_started_at_idx" ON "delivery_attempts"("delivery_id", "started_at");

ALTER TABLE "webhook_events" ADD CONSTRAINT "webhook_events_world_id_fkey" FOREIGN KEY ("world_id") REFERENCES "worlds"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "delivery_attempts" ADD CONSTRAINT "delivery_attempts_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- 3. Per-endpoint rollups for the dashboards 24 h stats: one row per (endpoint, 5-minute bucket,
-- writing backend), so concurrent writers never wait on each others rollup row. Delivery counts
-- are by current status, in the bucket of the deliverys creation, attempt counts, the latency
-- histogram (bounds in vw_latency_bounds()) and the last attempt in the bucket of its start.
CREATE TABLE "endpoint_stats" (
    "endpoint_id" UUID NOT NULL,
    "bucket" TIMESTAMPTZ(3) NOT NULL,
    "shard" INTEGER NOT NULL,
    "pending" INTEGER NOT NULL DEFAULT 0,
    "delivered" INTEGER NOT NULL DEFAULT 0,
    "failed" INTEGER NOT NULL DEFAULT 0,
    "skipped" INTEGER NOT NULL DEFAULT 0,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "attempts_succeeded" INTEGER NOT NULL DEFAULT 0,
    "latency_counts" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "latency_max_ms" INTEGER NOT NULL DEFAULT 0,
    "last_attempt_at" TIMESTAMPTZ(3),
    "last_attempt_status" INTEGER,
    "last_attempt_outcome" TEXT,
    CONSTRAINT "endpoint_stats_pkey" PRIMARY KEY ("endpoint_id", "bucket", "shard")
);
ALTER TABLE "endpoint_stats" ADD CONSTRAINT "endpoint_stats_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Upper bounds (ms) of the latency histograms buckets, the last bucket is everything above.
CREATE FUNCTION vw_latency_bounds() RETURNS INTEGER[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
E' SELECT ARRAY[5,10,25,50,75,100,150,200,300,500,750,1000,1500,2000,3000,5000,7500,10000,15000,30000] ';

CREATE FUNCTION vw_stats_bucket(ts TIMESTAMPTZ) RETURNS TIMESTAMPTZ LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
E' SELECT date_bin(''5 minutes'', ts, TIMESTAMPTZ ''2000-01-01 00:00:00+00'') ';

CREATE FUNCTION vw_add_counts(a INTEGER[], b INTEGER[]) RETURNS INTEGER[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
E' SELECT array_agg(COALESCE(x, 0) + COALESCE(y, 0) ORDER BY k) FROM unnest(a, b) WITH ORDINALITY AS t(x, y, k) ';

CREATE FUNCTION vw_stats_deliveries_inserted() RETURNS TRIGGER LANGUAGE plpgsql AS E'
BEGIN
  INSERT INTO endpoint_stats AS s (endpoint_id, bucket, shard, pending, delivered, failed, skipped)
  SELECT endpoint_id, vw_stats_bucket(created_at), pg_backend_pid(),
         count(*) FILTER (WHERE status = ''pending''), count(*) FILTER (WHERE status = ''delivered''),
         count(*) FILTER (WHERE status = ''failed''), count(*) FILTER (WHERE status = ''skipped'')
  FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (endpoint_id, bucket, shard) DO UPDATE SET
    pending = s.pending + EXCLUDED.pending, delivered = s.delivered + EXCLUDED.delivered,
    failed = s.failed + EXCLUDED.failed, skipped = s.skipped + EXCLUDED.skipped\073
  RETURN NULL\073
END ';

CREATE FUNCTION vw_stats_deliveries_updated() RETURNS TRIGGER LANGUAGE plpgsql AS E'
BEGIN
  INSERT INTO endpoint_stats AS s (endpoint_id, bucket, shard, pending, delivered, failed, skipped)
  SELECT n.endpoint_id, vw_stats_bucket(n.created_at), pg_backend_pid(),
         count(*) FILTER (WHERE n.status = ''pending'') - count(*) FILTER (WHERE o.status = ''pending''),
         count(*) FILTER (WHERE n.status = ''delivered'') - count(*) FILTER (WHERE o.status = ''delivered''),
         count(*) FILTER (WHERE n.status = ''failed'') - count(*) FILTER (WHERE o.status = ''failed''),
         count(*) FILTER (WHERE n.status = ''skipped'') - count(*) FILTER (WHERE o.status = ''skipped'')
  FROM old_rows o JOIN new_rows n ON n.id = o.id AND n.created_at = o.created_at
  WHERE n.status <> o.status
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (endpoint_id, bucket, shard) DO UPDATE SET
    pending = s.pending + EXCLUDED.pending, delivered = s.delivered + EXCLUDED.delivered,
    failed = s.failed + EXCLUDED.failed, skipped = s.skipped + EXCLUDED.skipped\073
  RETURN NULL\073
END ';

CREATE FUNCTION vw_stats_attempts_inserted() RETURNS TRIGGER LANGUAGE plpgsql AS E'
BEGIN
  INSERT INTO endpoint_stats AS s (endpoint_id, bucket, shard, attempts, attempts_succeeded, latency_counts, latency_max_ms,
                                   last_attempt_at, last_attempt_status, last_attempt_outcome)
  SELECT g.endpoint_id, g.bucket, pg_backend_pid(), g.n, g.ok,
         (SELECT array_agg(COALESCE(c.k, 0) ORDER BY i.i)
          FROM generate_series(1, array_length(vw_latency_bounds(), 1) + 1) AS i(i)
          LEFT JOIN (SELECT width_bucket(r.duration_ms, vw_latency_bounds()) + 1 AS i, count(*)::int AS k
                     FROM new_rows r WHERE r.endpoint_id = g.endpoint_id AND vw_stats_bucket(r.started_at) = g.bucket
                     GROUP BY 1) c ON c.i = i.i),
         g.max_ms, l.started_at, l.response_status, l.verdict
  FROM (SELECT endpoint_id, vw_stats_bucket(started_at) AS bucket, count(*)::int AS n,
               count(*) FILTER (WHERE verdict = ''delivered'')::int AS ok, max(duration_ms) AS max_ms
        FROM new_rows GROUP BY 1, 2) g
  CROSS JOIN LATERAL (SELECT r.started_at, r.response_status, r.verdict FROM new_rows r
                      WHERE r.endpoint_id = g.endpoint_id AND vw_stats_bucket(r.started_at) = g.bucket
                      ORDER BY r.started_at DESC, r.attempt_number DESC LIMIT 1) l
  ORDER BY 1, 2
  ON CONFLICT (endpoint_id, bucket, shard) DO UPDATE SET
    attempts = s.attempts + EXCLUDED.attempts,
    attempts_succeeded = s.attempts_succeeded + EXCLUDED.attempts_succeeded,
    latency_counts = vw_add_counts(s.latency_counts, EXCLUDED.latency_counts),
    latency_max_ms = GREATEST(s.latency_max_ms, EXCLUDED.latency_max_ms),
    last_attempt_at = CASE WHEN s.last_attempt_at IS NULL OR EXCLUDED.last_attempt_at >= s.last_attempt_at THEN EXCLUDED.last_attempt_at ELSE s.last_attempt_at END,
    last_attempt_status = CASE WHEN s.last_attempt_at IS NULL OR EXCLUDED.last_attempt_at >= s.last_attempt_at THEN EXCLUDED.last_attempt_status ELSE s.last_attempt_status END,
    last_attempt_outcome = CASE WHEN s.last_attempt_at IS NULL OR EXCLUDED.last_attempt_at >= s.last_attempt_at THEN EXCLUDED.last_attempt_outcome ELSE s.last_attempt_outcome END\073
  RETURN NULL\073
END ';

-- 4. Daily partitions: created (and attached) for every day in [first_day, last_day] that has
-- none, for the three tables. Safe with many callers: one at a time (transaction advisory lock),
-- and an existing partition is left as it is. CREATE TABLE + ATTACH takes only SHARE UPDATE
-- EXCLUSIVE on the parent, so writers are never blocked (CREATE TABLE ... PARTITION OF would take
-- ACCESS EXCLUSIVE). Returns how many partitions were created.
CREATE FUNCTION vw_create_log_partitions(first_day DATE, last_day DATE) RETURNS INTEGER LANGUAGE plpgsql AS E'
DECLARE
  d DATE\073
  t TEXT\073
  p TEXT\073
  created INTEGER := 0\073
  lo TIMESTAMPTZ\073
  hi TIMESTAMPTZ\073
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(''vw_create_log_partitions''))\073
  d := first_day\073
  WHILE d <= last_day LOOP
    lo := (d::timestamp AT TIME ZONE ''UTC'')\073
    hi := ((d + 1)::timestamp AT TIME ZONE ''UTC'')\073
    FOREACH t IN ARRAY ARRAY[''webhook_events'', ''webhook_deliveries'', ''delivery_attempts''] LOOP
      p := t || ''_p'' || to_char(d, ''YYYYMMDD'')\073
      IF to_regclass(format(''%I'', p)) IS NULL THEN
        EXECUTE format(''CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS)'', p, t)\073
        EXECUTE format(''ALTER TABLE %I ADD CONSTRAINT %I CHECK (%I >= %L AND %I < %L)'', p, p || ''_range'',
                       CASE WHEN t = ''delivery_attempts'' THEN ''delivery_created_at'' ELSE ''created_at'' END, lo,
                       CASE WHEN t = ''delivery_attempts'' THEN ''delivery_created_at'' ELSE ''created_at'' END, hi)\073
        EXECUTE format(''ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)'', t, p, lo, hi)\073
        -- The check only let ATTACH skip its validation scan\073 the partition bound now says the same.
        EXECUTE format(''ALTER TABLE %I DROP CONSTRAINT %I'', p, p || ''_range'')\073
        created := created + 1\073
      END IF\073
    END LOOP\073
    d := d + 1\073
  END LOOP\073
  RETURN created\073
END ';

-- 5. Partitions for every day of the kept history, and from yesterday to 7 days ahead.
SELECT vw_create_log_partitions(d::date, d::date)
FROM (SELECT DISTINCT date_trunc('day', created_at AT TIME ZONE 'UTC') AS d FROM "legacy_webhook_deliveries"
      UNION SELECT DISTINCT date_trunc('day', created_at AT TIME ZONE 'UTC') FROM "legacy_webhook_events") AS days;
SELECT vw_create_log_partitions((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 7);

-- 6. The history, copied over (attempts take their deliverys day and endpoint, deliveries their
-- events producer id). Triggers are created after the copy: the rollups cover only what happens
-- from now on, which is what a 24 h window needs after the first day.
INSERT INTO "webhook_events" (id, world_id, producer_id, type, occurred_at, created_at)
SELECT id, world_id, producer_id, type, occurred_at, created_at FROM "legacy_webhook_events";
INSERT INTO "webhook_deliveries" (id, endpoint_id, world_id, event_id, event_producer_id, type, body, test, status, attempt_count,
                                  last_status, next_attempt_at, created_at, updated_at)
SELECT d.id, d.endpoint_id, d.world_id, d.event_id, e.producer_id, d.type, d.body, d.test, d.status, d.attempt_count,
       d.last_status, d.next_attempt_at, d.created_at, d.updated_at
FROM "legacy_webhook_deliveries" d LEFT JOIN "legacy_webhook_events" e ON e.id = d.event_id
WHERE EXISTS (SELECT 1 FROM "webhook_endpoints" x WHERE x.id = d.endpoint_id);
INSERT INTO "delivery_attempts" (id, delivery_id, delivery_created_at, endpoint_id, attempt_number, trigger, started_at, request_headers,
                                 response_status, response_headers, response_body, response_body_truncated, duration_ms, error_kind, error, verdict)
SELECT a.id, a.delivery_id, d.created_at, d.endpoint_id, a.attempt_number, a.trigger, a.started_at, a.request_headers,
       a.response_status, a.response_headers, a.response_body, a.response_body_truncated, a.duration_ms, a.error_kind, a.error, a.verdict
FROM "legacy_delivery_attempts" a JOIN "legacy_webhook_deliveries" d ON d.id = a.delivery_id
WHERE EXISTS (SELECT 1 FROM "webhook_endpoints" x WHERE x.id = d.endpoint_id);
DROP TABLE "legacy_delivery_attempts";
DROP TABLE "legacy_webhook_deliveries";
DROP TABLE "legacy_webhook_events";

CREATE TRIGGER "webhook_deliveries_stats_inserted" AFTER INSERT ON "webhook_deliveries"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION vw_stats_deliveries_inserted();
CREATE TRIGGER "webhook_deliveries_stats_updated" AFTER UPDATE ON "webhook_deliveries"
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION vw_stats_deliveries_updated();
CREATE TRIGGER "delivery_attempts_stats_inserted" AFTER INSERT ON "delivery_attempts"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION vw_stats_attempts_inserted();
