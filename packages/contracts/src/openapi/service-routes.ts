/** The routes every HTTP service serves besides its API: health, readiness and its OpenAPI document. */
import { HEALTH_SCHEMA, READINESS_SCHEMA } from "../service.schema.js";
import { ComponentSchemas, jsonResponse, operation, schemaRef, type JsonObject, type ProblemMap } from "./document-kit.js";

/** Problems any route can answer (an unexpected error). */
export const ALWAYS_PROBLEMS: ProblemMap = { 500: ["internal"] };

/** The tag of the service routes. */
export const OPERATIONS_TAG = { name: "operations", description: "Liveness, readiness and this document." };

/**
 * `GET /healthz`, `GET /readyz` and `GET /openapi.json` of `service`, with their component schemas
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
            "503": jsonResponse("A dependency did not answer; `checks` says which and why.", schemaRef("Readiness")),
          },
        },
        ALWAYS_PROBLEMS,
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
