/** The worker's own HTTP port: `/healthz`, `/readyz` (database and Redis) and `/metrics`. */
import type { Express } from "express";
import type { RedisClient } from "@vw/queues";
import type { PgPool } from "@vw/db";
import { createApp, errorMiddleware, healthRouter, httpMetrics, metricsRouter, notFoundHandler, type Logger } from "@vw/service-kit";
import type { DeliveryWorker } from "./compose.js";

/** Builds the health and metrics app. */
export function createWorkerApp(deps: { pool: PgPool; redis: RedisClient; worker: DeliveryWorker; logger: Logger }): Express {
  // Health and metrics only: no request context, which on Node 20 would put async hooks on every
  // promise of the deliveries (see requestLogger).
  const app = createApp(deps.logger, { requestContext: false });
  app.use(httpMetrics(deps.worker.serviceMetrics));
  app.use(
    healthRouter([
      { name: "database", dependency: "postgresql", check: () => deps.pool.query("SELECT 1") },
      { name: "redis", check: () => deps.redis.ping() },
    ], deps.logger, deps.worker.serviceMetrics),
  );
  app.use(metricsRouter(deps.worker.serviceMetrics));
  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger));
  return app;
}
