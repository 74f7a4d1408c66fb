-- PostgreSQL is the schedule of record: a delivery that is not final (`pending`) says from its row
-- alone when it is next due (`next_attempt_at`, never null while pending) and which run of it is
-- current (`run`: 0 for the first, +1 for each Replay or recover), so the worker fleet can rebuild
-- Redis's dispatch index from PostgreSQL after Redis lost its data. `run_attempts` counts the
-- attempts of the current run: the retry schedule's position, read from the row instead of the job.
ALTER TABLE "webhook_deliveries" ADD COLUMN "run" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "webhook_deliveries" ADD COLUMN "run_attempts" INTEGER NOT NULL DEFAULT 0;

-- Pending deliveries never attempted were stored without a due time (due at once).
UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at" WHERE "status" = 'pending' AND "next_attempt_at" IS NULL;
-- Pending deliveries already retried: their run's attempts so far are all of their attempts.
UPDATE "webhook_deliveries" SET "run_attempts" = "attempt_count" WHERE "status" = 'pending' AND "attempt_count" > 0;

-- The reconciler's scan: pending deliveries by due time. Partial, so it holds only what is still
-- owed (a delivered delivery leaves it), and the hot path pays one small index entry per pending
-- row version. Built on every partition (new partitions get it when attached).
CREATE INDEX IF NOT EXISTS "webhook_deliveries_due_idx" ON "webhook_deliveries" ("next_attempt_at", "id") WHERE "status" = 'pending';
