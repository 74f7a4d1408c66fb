import { Router, type Express } from "express";
import { DrainSignals, type DeliveryQueues, type RedisClient } from "@vw/queues";
import { buildEventIngestDocument } from "@vw/contracts";
import {
  AuthThrottle,
  DEFAULT_AUTH_THROTTLE,
  createApp,
  createServiceMetrics,
  errorMiddleware,
  healthRouter,
  Histogram,
  METRICS_PREFIX,
  httpMetrics,
  metricsRouter,
  notFoundHandler,
  openApiRouter,
  type AuthThrottleLimits,
  type Logger,
  type ServiceMetrics,
} from "@vw/service-kit";
import { authHookRouter } from "./auth-hook.routes.js";
import { ingestDatabase, pingDatabase, type IngestDatabase } from "./database.js";
import type { PgPool } from "@vw/db";
import type { AuthHookService } from "./auth-hook.service.js";
import { analyticsRouter } from "./analytics.routes.js";
import type { AnalyticsIntake } from "./analytics.service.js";
import { DEFAULT_ANALYTICS_EVENT_MAX_BYTES, DEFAULT_MAX_EVENTS_PER_REQUEST } from "./config.js";
import { eventsRouter } from "./events.routes.js";
import { DEFAULT_BODY_LIMIT, jsonBody } from "./http-support.js";
import { ingestAuth } from "./ingest-auth.js";
import { IngestService } from "./ingest.service.js";
import { MemberIntakeService } from "./member-intake.service.js";
import { membersRouter } from "./members.routes.js";

/** What event-ingest is built from; `main.ts` passes the live ones, tests their own. */
export interface IngestAppDeps {
  /**
   * The process's one way to PostgreSQL (database.ts): main.ts builds it once and gives the same
   * to the auth hook and analytics; given only `pool`, the app builds its own over it.
   */
  db?: IngestDatabase;
  /** The process's pool, when `db` is not given. */
  pool?: PgPool;
  /** The producer connection (fails fast); `/readyz` pings it. */
  redis: RedisClient;
  /** The deliveries queue's shards (`openDeliveryQueues`) opened on `redis`. */
  queue: DeliveryQueues;
  logger: Logger;
  /** The bearer token every `/v1` request must present. */
  ingestToken: string;
  /** PLAY_URL (a trailing slash is ignored). */
  playUrl: string;
  /** MAX_EVENTS_PER_REQUEST; 500 by default. */
  maxEventsPerRequest?: number;
  /** Largest JSON body (bytes, or a size such as "5mb"); 5 MiB by default. */
  bodyLimit?: string | number;
  /** How long waking the endpoints may take before the request is a 503; 5 s by default. */
  enqueueTimeoutMs?: number;
  /** Analytics intake; `POST /v1/analytics` is mounted only when given (main.ts always gives it). */
  analytics?: AnalyticsIntake;
  /** ANALYTICS_EVENT_MAX_BYTES: largest inner analytics event; 16 KiB by default. */
  analyticsEventMaxBytes?: number;
  /**
   * The synchronous `member.connecting` hook; `POST /v1/auth-hook` is mounted only when given
   * (main.ts always gives it, so it can also drain its history writes at shutdown).
   */
  authHook?: AuthHookService;
  /** The process's metrics registry, served at `/metrics`; a fresh one when absent. */
  metrics?: ServiceMetrics;
  /** AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S; 20 failures a minute by default. */
  authThrottle?: AuthThrottleLimits;
  /** REDIS_KEY_PREFIX: the failed-authentication counters are kept in `redis` under it. */
  redisKeyPrefix: string;
  /** TRUST_PROXY: whose X-Forwarded-For names the client; nobody's by default. */
  trustProxy?: number | readonly string[] | false;
}

/** Prefix of every authenticated route. */
export const INGEST_API_PREFIX = "/v1";

/**
 * The event-ingest HTTP app: `/healthz`, `/readyz` (database and Redis), `/openapi.json` and the
 * authenticated `/v1` routes; every error is an RFC 9457 problem document.
 */
export function createIngestApp(deps: IngestAppDeps): Express {
  const metrics = deps.metrics ?? createServiceMetrics("event-ingest");
  const batchRequests = new Histogram({
    name: `${METRICS_PREFIX}ingest_batch_requests`,
    help: "Requests of POST /v1/events stored per intake transaction: those arriving while one runs are stored together in the next.",
    buckets: [1, 2, 4, 8, 16, 32, 64, 128],
    registers: [metrics.registry],
  });
  const db = deps.db ?? (deps.pool ? ingestDatabase(deps.pool) : null);
  if (db === null) throw new Error("createIngestApp: give db or pool");
  const ingest = new IngestService(db.log, new DrainSignals(deps.queue), db.members, {
    playUrl: deps.playUrl,
    enqueueTimeoutMs: deps.enqueueTimeoutMs ?? 5_000,
    onBatch: (requests) => batchRequests.observe(requests),
  });

  const api = Router({ caseSensitive: true });
  // Wrong ingest tokens are counted per client in Redis, so every replica refuses a guesser.
  const throttle = new AuthThrottle({
    redis: deps.redis,
    keyPrefix: deps.redisKeyPrefix,
    scope: "ingest-token",
    ...(deps.authThrottle ?? DEFAULT_AUTH_THROTTLE),
    logger: deps.logger,
  });
  api.use(ingestAuth(deps.ingestToken, throttle));
  api.use(jsonBody(deps.bodyLimit ?? DEFAULT_BODY_LIMIT));
  api.use(eventsRouter(ingest, deps.maxEventsPerRequest ?? DEFAULT_MAX_EVENTS_PER_REQUEST));
  api.use(membersRouter(new MemberIntakeService(db.worlds, db.members)));
  if (deps.analytics) {
    api.use(analyticsRouter(deps.analytics, deps.maxEventsPerRequest ?? DEFAULT_MAX_EVENTS_PER_REQUEST, deps.analyticsEventMaxBytes ?? DEFAULT_ANALYTICS_EVENT_MAX_BYTES));
  }
  if (deps.authHook) api.use(authHookRouter(deps.authHook));

  const app = createApp(deps.logger, { trustProxy: deps.trustProxy ?? false });
  app.use(httpMetrics(metrics));
  app.use(
    healthRouter([
      { name: "database", dependency: "postgresql", check: () => pingDatabase(db) },
      { name: "redis", check: () => deps.redis.ping() },
    ], deps.logger, metrics),
  );
  // Public, so mounted before (and outside) the authenticated router.
  app.use(metricsRouter(metrics));
  app.use(openApiRouter(buildEventIngestDocument()));
  app.use(INGEST_API_PREFIX, api);
  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger));
  return app;
}
