import type { Router } from "express";
import { buildAdminApiDocument } from "@vw/contracts";
import { openApiRouter as serveDocument } from "@vw/service-kit";

/**
 * `GET /openapi.json`, public: admin-api's OpenAPI 3.1 document, every `/admin/v1` route with its
 * answers and problem types, and the `webhooks` section (one entry per delivered type with its
 * payload's JSON Schema, plus the legacy `member.connecting` body) the dashboard's event catalogue reads.
 */
export function openApiRouter(): Router {
  return serveDocument(buildAdminApiDocument());
}
