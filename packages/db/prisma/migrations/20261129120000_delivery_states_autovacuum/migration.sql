-- Autovacuum of delivery_states, a queue: every delivery inserts its row at the intake and deletes
-- it once delivered, so the table holds few live rows and leaves a dead one per delivery. At the
-- defaults of PostgreSQL (vacuum at 20% dead, sleeping 2 ms per 200 pages of work) a pass comes
-- round only after hundreds of thousands of dead rows, and meanwhile every claim walks the dead
-- entries of its endpoint in the due index. A fixed threshold and no sleep keep it small: a pass
-- reads few pages, so it costs little however often it runs (at most once per
-- autovacuum_naptime, a minute by default).
ALTER TABLE "delivery_states" SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 10000,
  autovacuum_vacuum_cost_delay = 0,
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 10000
);
