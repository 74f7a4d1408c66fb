-- Per-endpoint throttle (issue 14): most deliveries started per second across all workers, or
-- NULL for none. Nullable and without a default, so adding it rewrites no rows. The rule "at
-- least 1" is enforced by the admin API schema (its only writer): a CHECK constraint here makes
-- the offline Prisma schema engine (WASM) crash in migrate diff, and the worker treats anything
-- below 1 as no throttle anyway.
ALTER TABLE "webhook_endpoints" ADD COLUMN "rate_limit_per_second" INTEGER;
