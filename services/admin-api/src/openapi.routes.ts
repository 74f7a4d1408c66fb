import { Router } from "express";
import { buildOpenApiDocument } from "@vw/contracts";
import { methodNotAllowed } from "./http-support.js";

/** Where the OpenAPI document is served. */
export const OPENAPI_PATH = "/openapi.json";

/**
 * `GET /openapi.json`, public: the OpenAPI 3.1 document of the platform's webhooks (one `webhooks`
 * entry per delivered type with its payload's JSON Schema, plus the legacy `member.connecting`
 * body). It describes what customers receive, so it needs no token. Built once: it only changes
 * with a deployment.
 */
export function openApiRouter(): Router {
  const body = JSON.stringify(buildOpenApiDocument());
  const router = Router({ caseSensitive: true });
  router.get(OPENAPI_PATH, (_req, res) => {
    res.type("application/json").set("Cache-Control", "public, max-age=300").send(body);
  });
  router.all(OPENAPI_PATH, methodNotAllowed(["GET", "HEAD"]));
  return router;
}
