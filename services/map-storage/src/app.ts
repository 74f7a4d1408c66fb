import type { Express } from "express";
import { buildMapStorageDocument } from "@vw/contracts";
import type { ApiKeyPrincipal } from "@vw/db";
import {
  createApp,
  createServiceMetrics,
  errorMiddleware,
  healthRouter,
  httpMetrics,
  metricsRouter,
  notFoundHandler,
  openApiRouter,
  type ApiKeyAuthenticator,
  type Logger,
  type ReadinessCheck,
  type ServiceMetrics,
} from "@vw/service-kit";
import type { ActiveFileSandbox } from "./files/active-content.js";
import { cors, filesRouter } from "./files/files.routes.js";
import type { FilesService } from "./files/files.service.js";
import { schemasRouter } from "./schemas.routes.js";
import { sendTimeout } from "./send-timeout.js";
import { toolsRouter, type ToolsRoutesDeps } from "./uploads/tools.routes.js";

export interface MapStorageAppDeps {
  files: FilesService;
  /** Map authors' tools (upload, download, ping, rooms), less what the app itself provides. */
  tools: Omit<ToolsRoutesDeps, "auth" | "logger" | "publicBaseUrl" | "playUrl">;
  auth: ApiKeyAuthenticator<ApiKeyPrincipal>;
  logger: Logger;
  readiness: ReadinessCheck[];
  maxFileBytes: number;
  /** MAX_PATCH_OPERATIONS. */
  maxPatchOperations: number;
  /** SEND_TIMEOUT_MS: how long a reader may stop reading before it is disconnected. */
  sendTimeoutMs: number;
  publicBaseUrl: string;
  playUrl: string;
  /** The process's metrics registry, served at `/metrics`; a fresh one when absent. */
  metrics?: ServiceMetrics;
  /** ACTIVE_FILE_SANDBOX; `strict` by default. */
  activeFileSandbox?: ActiveFileSandbox;
  /** TRUST_PROXY: whose X-Forwarded-For names the client; nobody's by default. */
  trustProxy?: number | readonly string[] | false;
}

/** The map-storage HTTP app, built from its dependencies (tests build it in-process). */
export function createMapStorageApp(deps: MapStorageAppDeps): Express {
  const metrics = deps.metrics ?? createServiceMetrics("map-storage");
  const app = createApp(deps.logger, { trustProxy: deps.trustProxy ?? false });
  app.use(httpMetrics(metrics));
  app.use(sendTimeout(deps.sendTimeoutMs, deps.logger));
  app.use(healthRouter(deps.readiness, deps.logger, metrics));
  // Before the files handler, which would read `/metrics` as a file path (and refuse it).
  app.use(metricsRouter(metrics));
  app.use(cors);
  app.use(openApiRouter(buildMapStorageDocument({ serverUrl: deps.publicBaseUrl })));
  app.use(schemasRouter(deps.publicBaseUrl));
  // Before the files API: their root names are routes, never files.
  app.use(toolsRouter({ ...deps.tools, auth: deps.auth, logger: deps.logger, publicBaseUrl: deps.publicBaseUrl, playUrl: deps.playUrl }));
  app.use(filesRouter(deps.files, deps.auth, deps));
  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger));
  return app;
}
