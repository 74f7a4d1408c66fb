import express from "express";
import { AppError } from "./errors.js";

/** Where every HTTP service serves its OpenAPI document. */
export const OPENAPI_PATH = "/openapi.json";

/**
 * `GET /openapi.json`, public: the service's OpenAPI 3.1 document (it describes the API, not any
 * tenant's data, so it needs no token). Serialised once: it only changes with a deployment.
 * Other methods are 405 with `Allow`.
 */
export function openApiRouter(document: object): express.Router {
  const body = JSON.stringify(document);
  const router = express.Router({ caseSensitive: true });
  router
    .route(OPENAPI_PATH)
    .get((_req, res) => {
      res.type("application/json").set("Cache-Control", "public, max-age=300").send(body);
    })
    .all((req) => {
      throw new AppError(405, "method-not-allowed", `${req.method} is not supported here; use GET or HEAD.`, { headers: { Allow: "GET, HEAD" } });
    });
  return router;
}
