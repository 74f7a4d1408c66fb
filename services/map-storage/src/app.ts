import type { Express } from "express";
import { buildMapStorageDocument } from "@vw/contracts";
import {
  createApp,
  errorMiddleware,
  healthRouter,
  notFoundHandler,
  openApiRouter,
  requestLogger,
  type Logger,
  type ReadinessCheck,
} from "@vw/service-kit";
import type { ApiKeyAuthenticator } from "./auth/api-key-auth.js";
import { cors, filesRouter } from "./files/files.routes.js";
import type { FilesService } from "./files/files.service.js";
import { schemasRouter } from "./schemas.routes.js";

export interface MapStorageAppDeps {
  files: FilesService;
  auth: ApiKeyAuthenticator;
  logger: Logger;
  readiness: ReadinessCheck[];
  maxFileBytes: number;
  publicBaseUrl: string;
  playUrl: string;
}

/** The map-storage HTTP app, built from its dependencies (tests build it in-process). */
export function createMapStorageApp(deps: MapStorageAppDeps): Express {
  const app = createApp();
  app.use(requestLogger(deps.logger));
  app.use(healthRouter(deps.readiness));
  app.use(cors);
  app.use(openApiRouter(buildMapStorageDocument({ serverUrl: deps.publicBaseUrl })));
  app.use(schemasRouter(deps.publicBaseUrl));
  app.use(filesRouter(deps.files, deps.auth, deps));
  app.use(notFoundHandler);
  app.use(errorMiddleware(deps.logger));
  return app;
}
