import { Router, type Express } from "express";
import { ApiKeyStore, DeliveryHistory, DeliveryLog, DeliveryRecoveries, EndpointStore, MemberDirectory, WorldDirectory, hashApiKey, prismaRunner, type PrismaClient, type SqlRunner } from "@vw/db";
import {
  ApiKeyAuthenticator,
  AuthThrottle,
  DEFAULT_AUTH_THROTTLE,
  createApp,
  createServiceMetrics,
  errorMiddleware,
  healthRouter,
  httpMetrics,
  metricsRouter,
  notFoundHandler,
  type AuthThrottleLimits,
  type Logger,
  type ServiceMetrics,
  type ThrottleRedis,
} from "@vw/service-kit";
import { CURRENT_API_VERSION, DEFAULT_MAX_STORAGE_BYTES_PER_WORLD } from "@vw/contracts";
import type { DeliveryAgents, EndpointUrlPolicy, HostResolver, SecretBox } from "@vw/webhook-core";
import type { Queue } from "bullmq";
import { DrainSignals, type DeliveryQueues } from "@vw/queues";
import { adminOrSessionAuth, sessionCookiePolicy } from "./dashboard-auth.js";
import { dashboardPageRouter, dashboardSecurityHeaders } from "./dashboard-page.js";
import { dashboardSessionApiRouter, dashboardSessionsAdminRouter } from "./dashboard-sessions.routes.js";
import { DashboardSessionsService } from "./dashboard-sessions.service.js";
import { ApiKeysService } from "./api-keys.service.js";
import { deliveriesRouter } from "./deliveries.routes.js";
import { DeliveriesService } from "./deliveries.service.js";
import { EndpointTestService } from "./endpoint-test.service.js";
import { createEndpointUrlChecker } from "./endpoint-url.js";
import { endpointsRouter } from "./endpoints.routes.js";
import { EndpointsService, type EndpointQuotas } from "./endpoints.service.js";
import { jsonBody } from "./http-support.js";
import { INBOUND_API_PREFIX, inboundMembersRouter } from "./inbound-members.routes.js";
import { openApiRouter } from "./openapi.routes.js";
import { OrganizationsService } from "./organizations.service.js";
import { recoveriesRouter } from "./recoveries.routes.js";
import { RecoveriesService } from "./recoveries.service.js";
import { organizationsRouter } from "./organizations.routes.js";
import { WorldsService } from "./worlds.service.js";
import { DEFAULT_ENDPOINT_QUOTAS } from "./config.js";
import { worldsRouter } from "./worlds.routes.js";
import { MapStorageRooms } from "./map-storage-rooms.js";
import { roomsRouter } from "./rooms.routes.js";

/** What the admin API is built from; `main.ts` passes the live ones, tests their own. */
export interface AdminAppDeps {
  /** Admin CRUD (organizations, worlds, sessions, API keys); main.ts builds it over the process's one pool. */
  prisma: PrismaClient;
  /**
   * The runner of the shared tables' owners (delivery log, history, endpoints, members,
   * recoveries, worlds by slugs): main.ts gives `pgRunner` over the same pool as `prisma`, so the
   * process holds one pool bounded by DATABASE_POOL_MAX; Prisma's own (`prismaRunner`) by default.
   */
  sql?: SqlRunner;
  logger: Logger;
  /** The bearer token every `/admin/v1` request must present. */
  adminToken: string;
  /** PUBLIC_MAP_STORAGE_URL (no trailing slash). */
  publicMapStorageUrl: string;
  /** PLAY_URL (no trailing slash). */
  playUrl: string;
  /** MAP_STORAGE_INTERNAL_URL: map-storage as admin-api reaches it, for the room listing; PUBLIC_MAP_STORAGE_URL by default. */
  mapStorageInternalUrl?: string;
  /** Seals endpoint secrets at rest (built from SECRETS_ENCRYPTION_KEY). */
  secretBox: SecretBox;
  /** ENDPOINT_URL_POLICY. */
  endpointUrlPolicy: EndpointUrlPolicy;
  /** DNS lookup used by the URL policy; the system resolver by default (tests inject their own). */
  resolveHost?: HostResolver;
  /** `apiVersion` frozen on endpoints created now; {@link CURRENT_API_VERSION} by default. */
  currentApiVersion?: string;
  /** Producer handle of the deliveries queue's shards (Replay adds its jobs to the endpoint's). */
  deliveryQueue: DeliveryQueues;
  /** HTTP agents of the Test action: `createDeliveryAgents(ENDPOINT_URL_POLICY)`, as the worker's. */
  deliveryAgents: DeliveryAgents;
  /** DELIVERY_TIMEOUT_MS: budget of a Test attempt. */
  deliveryTimeoutMs: number;
  /** PUBLIC_ADMIN_URL (dashboard links, the dashboard's origin, Secure cookies when https); `http://localhost:3003` by default. */
  publicAdminUrl?: string;
  /** DASHBOARD_FRAME_ANCESTORS: origins allowed to embed the dashboard; none (not embeddable) by default. */
  dashboardFrameAncestors?: readonly string[];
  /**
   * The built dashboard's folder (`DASHBOARD_ASSETS_DIR` of `@vw/dashboard/assets-dir`), served
   * under `/dashboard/`; without it (or while it is not built) the page is a 404 saying so.
   */
  dashboardAssetsDir?: string;
  /** Clock of dashboard session expiries and of the Inbound API's key cache; the system clock unless injected. */
  now?: () => Date;
  /** Producer handle of the `QUEUE_NAMES.recoveries` queue (recover adds its job there). */
  recoveryQueue: Queue;
  /** How long Replay waits for Redis to take its job before answering 503; 5 s by default. */
  enqueueTimeoutMs?: number;
  /** API_KEY_CACHE_TTL_MS: how long the Inbound API trusts a key lookup; 5 s by default. */
  apiKeyCacheTtlMs?: number;
  /** The process's metrics registry, served at `/metrics`; a fresh one when absent. */
  metrics?: ServiceMetrics;
  /** MAX_ENDPOINTS_PER_WORLD and MAX_AUTH_ENDPOINTS_PER_WORLD; 50 and 10 by default. */
  endpointQuotas?: EndpointQuotas;
  /** MAX_STORAGE_BYTES_PER_WORLD (map-storage enforces it; shown with each world); 10 GiB by default. */
  maxStorageBytesPerWorld?: number;
  /**
   * Redis of the failed-authentication counters (shared by every replica): the producer connection
   * of the queues. Without it the counters live in this process only.
   */
  throttleRedis?: ThrottleRedis;
  /** AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S; 20 failures a minute by default. */
  authThrottle?: AuthThrottleLimits;
  /** REDIS_KEY_PREFIX of the throttle's counters; `vw` by default. */
  redisKeyPrefix?: string;
  /** TRUST_PROXY: whose X-Forwarded-For names the client; nobody's by default. */
  trustProxy?: number | readonly string[] | false;
}

/** PUBLIC_ADMIN_URL's default (the dev stack's admin-api). */
export const DEFAULT_PUBLIC_ADMIN_URL = "http://localhost:3003";

/** Prefix of every authenticated admin route. */
export const ADMIN_API_PREFIX = "/admin/v1";

/**
 * The admin-api HTTP app: `/healthz`, `/readyz` (database and Redis ping) and the authenticated
 * `/admin/v1` routes (operator bearer token or dashboard session cookie), the dashboard under
 * `/dashboard/` with its session API; every error is an RFC 9457 problem document.
 */
export function createAdminApp(deps: AdminAppDeps): Express {
  // One runner for the owners of the shared tables, each built once here and handed down
  // (docs/decisions/0012-one-database-path-per-process.md).
  const sql = deps.sql ?? prismaRunner(deps.prisma);
  const log = new DeliveryLog(sql);
  const history = new DeliveryHistory(sql);
  const endpointStore = new EndpointStore(sql, log);
  const members = new MemberDirectory(sql);
  const deliveryRecoveries = new DeliveryRecoveries(sql);
  const worldDirectory = new WorldDirectory(sql);
  const apiKeyStore = new ApiKeyStore(deps.prisma);

  const organizations = new OrganizationsService(deps.prisma);
  const worlds = new WorldsService(deps.prisma, worldDirectory, organizations, {
    mapStorageUrl: deps.publicMapStorageUrl.replace(/\/+$/, ""),
    playUrl: deps.playUrl.replace(/\/+$/, ""),
    maxStorageBytesPerWorld: deps.maxStorageBytesPerWorld ?? DEFAULT_MAX_STORAGE_BYTES_PER_WORLD,
  });
  const apiKeys = new ApiKeysService(deps.prisma, apiKeyStore, worlds);
  const endpointUrls = createEndpointUrlChecker(deps.endpointUrlPolicy, deps.resolveHost, deps.logger);
  const endpoints = new EndpointsService(endpointStore, worlds, {
    secretBox: deps.secretBox,
    currentApiVersion: deps.currentApiVersion ?? CURRENT_API_VERSION,
    quotas: deps.endpointQuotas ?? DEFAULT_ENDPOINT_QUOTAS,
  });
  const deliveries = new DeliveriesService(log, history, endpoints, new DrainSignals(deps.deliveryQueue), deps.logger, deps.enqueueTimeoutMs);
  const endpointTests = new EndpointTestService(log, endpoints, {
    playUrl: deps.playUrl.replace(/\/+$/, ""),
    secretBox: deps.secretBox,
    agents: deps.deliveryAgents,
    timeoutMs: deps.deliveryTimeoutMs,
    logger: deps.logger,
  });
  const now = deps.now ?? (() => new Date());
  const publicAdminUrl = (deps.publicAdminUrl ?? DEFAULT_PUBLIC_ADMIN_URL).replace(/\/+$/, "");
  const frameAncestors = deps.dashboardFrameAncestors ?? [];
  const dashboardOrigin = new URL(publicAdminUrl).origin;
  const cookie = sessionCookiePolicy(publicAdminUrl, frameAncestors);
  const recoveries = new RecoveriesService(deliveryRecoveries, history, endpoints, deps.recoveryQueue, {
    now,
    ...(deps.enqueueTimeoutMs === undefined ? {} : { enqueueTimeoutMs: deps.enqueueTimeoutMs }),
  });
  const dashboardSessions = new DashboardSessionsService(deps.prisma, worlds, { publicAdminUrl, now });
  if (deps.endpointUrlPolicy === "any") {
    deps.logger.warn(
      { endpointUrlPolicy: "any" },
      "ENDPOINT_URL_POLICY=any: webhook endpoint URLs are NOT checked (plain http, loopback and private addresses accepted). " +
        "For development and tests only; never run production like this.",
    );
  }

  // One throttle per kind of credential: failures with API keys do not lock a client out of the admin token.
  const throttle = (scope: string) =>
    new AuthThrottle({
      redis: deps.throttleRedis ?? null,
      keyPrefix: deps.redisKeyPrefix ?? "vw",
      scope,
      ...(deps.authThrottle ?? DEFAULT_AUTH_THROTTLE),
      logger: deps.logger,
    });

  const apiKeyAuth = new ApiKeyAuthenticator(
    apiKeyStore,
    {
      realm: "inbound-api",
      cacheTtlMs: deps.apiKeyCacheTtlMs ?? 5_000,
      touchEveryMs: 60_000,
      hash: hashApiKey,
      throttle: throttle("api-key"),
      ...(deps.now ? { now: () => (deps.now as () => Date)().getTime() } : {}),
    },
    deps.logger,
  );

  const api = Router({ caseSensitive: true });
  api.use(adminOrSessionAuth({ adminToken: deps.adminToken, sessions: dashboardSessions, cookie, dashboardOrigin, throttle: throttle("admin-token") }));
  api.use(jsonBody());
  api.use(organizationsRouter(organizations, worlds));
  api.use(worldsRouter(worlds, apiKeys));
  api.use(
    roomsRouter(
      worlds,
      new MapStorageRooms({ baseUrl: (deps.mapStorageInternalUrl ?? deps.publicMapStorageUrl).replace(/\/+$/, ""), adminToken: deps.adminToken, timeoutMs: 5_000 }),
    ),
  );
  api.use(endpointsRouter(endpoints, endpointUrls));
  api.use(deliveriesRouter(deliveries, endpointTests));
  api.use(recoveriesRouter(recoveries));
  api.use(dashboardSessionsAdminRouter(dashboardSessions));

  const dashboard = Router({ caseSensitive: true });
  dashboard.use(dashboardSecurityHeaders(frameAncestors));
  dashboard.use("/api/session", dashboardSessionApiRouter({ sessions: dashboardSessions, cookie, dashboardOrigin, now, throttle: throttle("dashboard-code") }));
  dashboard.use(dashboardPageRouter(deps.dashboardAssetsDir));

  const metrics = deps.metrics ?? createServiceMetrics("admin-api");
  const app = createApp(deps.logger, { trustProxy: deps.trustProxy ?? false });
  app.use(httpMetrics(metrics));
  app.use(
    healthRouter([
      { name: "database", dependency: "postgresql", check: async () => void (await sql.query({ name: "vw_ping", text: "SELECT 1" }, [])) },
      // One cheap read through the queue's own connection: Replay needs exactly that to work.
      { name: "redis", check: () => (deps.deliveryQueue.shards[0] as Queue).getJobCounts("wait") },
    ], deps.logger, metrics),
  );
  // Public, so mounted before (and outside) the authenticated router.
  app.use(metricsRouter(metrics));
  app.use(openApiRouter());
  app.use(ADMIN_API_PREFIX, api);
  // The Inbound API, for customers' receivers: world API keys, not ADMIN_TOKEN.
  app.use(INBOUND_API_PREFIX, inboundMembersRouter(apiKeyAuth, members));
  app.use("/dashboard", dashboard);
  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger));
  return app;
}
