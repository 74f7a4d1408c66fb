-- Per-endpoint throttle (issue 14): most deliveries started per second across all workers, or
-- NULL for none. Nullable and without a default, so adding it rewrites no rows.
ALTER TABLE "webhook_endpoints" ADD COLUMN "rate_limit_per_second" INTEGER;
ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_rate_limit_per_second_check" CHECK ("rate_limit_per_second" IS NULL OR "rate_limit_per_second" >= 1);
