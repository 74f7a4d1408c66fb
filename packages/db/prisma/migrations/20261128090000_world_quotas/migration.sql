-- Per-world quota overrides, set by the operator only (ADMIN_TOKEN): most webhook endpoints, most
-- endpoints subscribed to `auth`, most analytics events held in Redis for the world. NULL means
-- the platform default (MAX_ENDPOINTS_PER_WORLD, MAX_AUTH_ENDPOINTS_PER_WORLD,
-- ANALYTICS_BUFFER_MAX_PER_WORLD). Nullable without a default, so adding them rewrites no rows;
-- "at least 1" is enforced by the admin API schema, their only writer (no CHECK constraint: the
-- offline Prisma schema engine crashes introspecting one).
ALTER TABLE "worlds" ADD COLUMN "max_endpoints" INTEGER;
ALTER TABLE "worlds" ADD COLUMN "max_auth_endpoints" INTEGER;
ALTER TABLE "worlds" ADD COLUMN "analytics_buffer_max" INTEGER;
