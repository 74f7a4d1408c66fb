/** The routes every HTTP service serves besides its API: health, readiness, metrics and its OpenAPI document. */
import { HEALTH_SCHEMA, READINESS_SCHEMA } from "../service.schema.js";
import { ComponentSchemas, jsonResponse, operation, schemaRef, type JsonObject, type ProblemMap } from "./document-kit.js";

/**
 * Problems any route can answer: a path segment or query parameter that is not platform text (a
 * NUL, invalid percent-encoding; service-kit's request guard runs before every route), and an
 * unexpected error.
 */
export const ALWAYS_PROBLEMS: ProblemMap = { 400: ["invalid-path", "invalid-parameter"], 500: ["internal"] };

/** The tag of the service routes. */
export const OPERATIONS_TAG = { name: "operations", description: "Liveness, readiness and this document." };

/**
 * `GET /healthz`, `GET /readyz`, `GET /metrics` and `GET /openapi.json` of `service`, with their component schemas
 * added to `components`.
 */
export function serviceRoutes(service: string, components: ComponentSchemas): Record<string, Record<string, JsonObject>> {
  components.add("Health", HEALTH_SCHEMA);
  components.add("Readiness", READINESS_SCHEMA);
  const common = { tags: [OPERATIONS_TAG.name], security: null };
  return {
    "/healthz": {
      get: operation(
        { ...common, operationId: `${service}.healthz`, summary: "Liveness: the process is up", responses: { "200": jsonResponse("Up.", schemaRef("Health")) } },
        ALWAYS_PROBLEMS,
      ),
    },
    "/readyz": {
      get: operation(
        {
          ...common,
          operationId: `${service}.readyz`,
          summary: "Readiness: every dependency answers within 2 s",
          responses: {
            "200": jsonResponse("Every dependency answered.", schemaRef("Readiness")),
            "503": jsonResponse("A dependency did not answer; `checks` says which (the reason is logged, never answered: this route is public).", schemaRef("Readiness")),
          },
        },
        ALWAYS_PROBLEMS,
      ),
    },
    "/metrics": {
      get: operation(
        {
          ...common,
          operationId: `${service}.metrics`,
          summary: "Prometheus metrics (text exposition format 0.0.4), unauthenticated like the probes",
          responses: {
            "200": {
              description: "The process's metrics: HTTP requests by route template, Node process and event-loop figures, and the service's own.",
              content: { "text/plain": { schema: { type: "string" } } },
            },
          },
        },
        { ...ALWAYS_PROBLEMS, 503: ["dependency-unavailable"] },
      ),
    },
    "/openapi.json": {
      get: operation(
        {
          ...common,
          operationId: `${service}.openapi`,
          summary: "This OpenAPI 3.1 document",
          responses: { "200": jsonResponse("The document.", {
            type: "object",
            required: ["openapi", "info", "paths"],
            properties: { openapi: { const: "3.1.0" }, info: { type: "object" }, paths: { type: "object" } },
          }) },
        },
        ALWAYS_PROBLEMS,
      ),
    },
  };
}
