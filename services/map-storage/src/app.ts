import type { Express } from "express";
import type { ApiKeyPrincipal } from "@vw/db";
import { createApp, errorMiddleware, healthRouter, requestLogger, type ApiKeyAuthenticator, type Logger, type ReadinessCheck } from "@vw/service-kit";
import { cors, filesHandler } from "./files/files.routes.js";
import type { FilesService } from "./files/files.service.js";
import { schemasRouter } from "./schemas.routes.js";

export interface MapStorageAppDeps {
  files: FilesService;
  auth: ApiKeyAuthenticator<ApiKeyPrincipal>;
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
  app.use(schemasRouter(deps.publicBaseUrl));
  app.use(filesHandler(deps.files, deps.auth, deps));
  app.use(errorMiddleware(deps.logger));
  return app;
}
