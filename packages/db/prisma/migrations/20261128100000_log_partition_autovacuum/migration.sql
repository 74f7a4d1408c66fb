-- Autovacuum thresholds of the daily partitions of the delivery log. The partition of a day in
-- webhook_deliveries takes every delivery of that day and one status update per attempt (each a
-- dead tuple: the update is never HOT, `status` being indexed), and delivery_attempts takes one
-- insert per attempt. With the default scale factors of PostgreSQL (vacuum at 20% dead, analyze at 10%
-- changed) the partition of today, the one every write goes to, is vacuumed only once millions of dead
-- tuples have piled up, and its statistics lag behind its growth. 2% keeps it small and planned
-- from fresh statistics all day. The partitions of earlier days, written no more, are left alone
-- by autovacuum either way. Autovacuum itself must be on (the default of PostgreSQL): see
-- packages/db/README.md, "PostgreSQL settings".
CREATE OR REPLACE FUNCTION vw_create_log_partitions(first_day DATE, last_day DATE) RETURNS INTEGER LANGUAGE plpgsql AS E'
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
        EXECUTE format(''ALTER TABLE %I DROP CONSTRAINT %I'', p, p || ''_range'')\073
        IF t <> ''webhook_events'' THEN
          EXECUTE format(''ALTER TABLE %I SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02)'', p)\073
        END IF\073
        created := created + 1\073
      END IF\073
    END LOOP\073
    d := d + 1\073
  END LOOP\073
  RETURN created\073
END ';

-- The partitions that exist already (today and the days ahead among them) get the same.
DO E'
DECLARE
  r RECORD\073
BEGIN
  FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class parent ON parent.oid = i.inhparent
           WHERE parent.relname IN (''webhook_deliveries'', ''delivery_attempts'') LOOP
    EXECUTE format(''ALTER TABLE %I SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02)'', r.relname)\073
  END LOOP\073
END ';
