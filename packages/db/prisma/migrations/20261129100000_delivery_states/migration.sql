-- A delivery's mutable state leaves the row that holds its body. `webhook_deliveries` (partitioned
-- by day) keeps what never changes after the intake: the bytes, the endpoint, the event, the
-- type. `delivery_states` (one table, not partitioned) holds the state of every delivery that is
-- not delivered: `pending` (due at `due_at`, with a copy of the bytes to send), `failed` or
-- `skipped` (final). A delivery with no row here is delivered: the common path inserts the state
-- row at the intake and deletes it once delivered, and never rewrites the log's wide row, nor
-- plans or locks every daily partition to find what is due
-- (docs/decisions/0017-delivery-cost-and-endpoint-drains.md).
CREATE TABLE "delivery_states" (
  "delivery_id" UUID NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL,
  "endpoint_id" UUID NOT NULL,
  "status" TEXT NOT NULL,
  "due_at" TIMESTAMPTZ(3),
  "claimed_until" TIMESTAMPTZ(3),
  "run" INTEGER NOT NULL DEFAULT 0,
  "run_attempts" INTEGER NOT NULL DEFAULT 0,
  "attempt_count" INTEGER NOT NULL DEFAULT 0,
  "last_status" INTEGER,
  "body" BYTEA,
  "test" BOOLEAN NOT NULL DEFAULT false,
  "trace" TEXT,
  "wait_reason" TEXT,
  "updated_at" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "delivery_states_pkey" PRIMARY KEY ("delivery_id")
) WITH (fillfactor = 70);

ALTER TABLE "delivery_states" ADD CONSTRAINT "delivery_states_endpoint_id_fkey"
  FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- What is due, per endpoint, in due order: the drains' claims and the reconciler's sweep.
CREATE INDEX "delivery_states_due_idx" ON "delivery_states" ("endpoint_id", "due_at") WHERE "status" = 'pending';
-- The history's filters of final states (failed, skipped) and recover's window of failed
-- deliveries, partial so that the hot path's inserts of pending states cost it nothing (a pending
-- state is found through the due index).
CREATE INDEX "delivery_states_final_idx" ON "delivery_states" ("endpoint_id", "status", "created_at" DESC, "delivery_id" DESC) WHERE "status" <> 'pending';

-- Every delivery that is not delivered moves over with its schedule, a pending one with its bytes.
INSERT INTO "delivery_states" ("delivery_id", "created_at", "endpoint_id", "status", "due_at", "run", "run_attempts", "attempt_count",
                               "last_status", "body", "test", "updated_at")
SELECT "id", "created_at", "endpoint_id", "status",
       CASE WHEN "status" = 'pending' THEN COALESCE("next_attempt_at", "created_at") END,
       "run", "run_attempts", "attempt_count", "last_status",
       CASE WHEN "status" = 'pending' THEN "body" END, "test", "updated_at"
FROM "webhook_deliveries" WHERE "status" <> 'delivered';

-- The rollup is written by the statements that change a delivery's state or log an attempt
-- (packages/db/src/delivery-log), from what they already hold, instead of by triggers that copied
-- every written row (bodies and headers included) into transition tables.
DROP TRIGGER IF EXISTS "webhook_deliveries_stats_inserted" ON "webhook_deliveries";
DROP TRIGGER IF EXISTS "webhook_deliveries_stats_updated" ON "webhook_deliveries";
DROP TRIGGER IF EXISTS "delivery_attempts_stats_inserted" ON "delivery_attempts";
DROP FUNCTION IF EXISTS vw_stats_deliveries_inserted();
DROP FUNCTION IF EXISTS vw_stats_deliveries_updated();
DROP FUNCTION IF EXISTS vw_stats_attempts_inserted();

DROP INDEX IF EXISTS "webhook_deliveries_endpoint_id_status_created_at_id_idx";
DROP INDEX IF EXISTS "webhook_deliveries_due_idx";
ALTER TABLE "webhook_deliveries" DROP COLUMN "status";
ALTER TABLE "webhook_deliveries" DROP COLUMN "attempt_count";
ALTER TABLE "webhook_deliveries" DROP COLUMN "last_status";
ALTER TABLE "webhook_deliveries" DROP COLUMN "next_attempt_at";
ALTER TABLE "webhook_deliveries" DROP COLUMN "run";
ALTER TABLE "webhook_deliveries" DROP COLUMN "run_attempts";
ALTER TABLE "webhook_deliveries" DROP COLUMN "updated_at";

-- Deduplication in one probe per event: the ids events were accepted under, per world, in one
-- unique index for the whole retention (webhook_events is partitioned by day, so its index had to
-- be searched in every day's partition, about a hundred of them with 90 days of history). The
-- unique index also serialises two intakes of one id (the second waits for the first's commit).
CREATE TABLE "webhook_event_keys" (
  "world_id" UUID NOT NULL,
  "producer_id" TEXT NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "webhook_event_keys_pkey" PRIMARY KEY ("world_id", "producer_id")
);
ALTER TABLE "webhook_event_keys" ADD CONSTRAINT "webhook_event_keys_world_id_fkey"
  FOREIGN KEY ("world_id") REFERENCES "worlds"("id") ON DELETE CASCADE ON UPDATE CASCADE;
CREATE INDEX "webhook_event_keys_created_at_idx" ON "webhook_event_keys" ("created_at");
INSERT INTO "webhook_event_keys" ("world_id", "producer_id", "created_at")
SELECT "world_id", "producer_id", min("created_at") FROM "webhook_events" GROUP BY 1, 2;
DROP INDEX IF EXISTS "webhook_events_world_id_producer_id_idx";

-- Nothing looks deliveries up by their event row any more.
DROP INDEX IF EXISTS "webhook_deliveries_event_id_idx";

-- The rollup's rows are updated in place by every statement that counts something: room on their
-- page lets PostgreSQL do it without a new index entry (HOT).
ALTER TABLE "endpoint_stats" SET (fillfactor = 50);
