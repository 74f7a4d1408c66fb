/**
 * Answers every HTTP service gives outside its API: `GET /healthz` and `GET /readyz`
 * (service-kit's health router writes them).
 */

const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

/** `GET /healthz`: the process is up. */
export const HEALTH_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:service:health",
  title: "Liveness",
  type: "object",
  additionalProperties: false,
  required: ["status"],
  properties: { status: { const: "ok" } },
} as const;

/** `GET /readyz`: every dependency answered within 2 s (200), or not (503). */
export const READINESS_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:service:readiness",
  title: "Readiness",
  type: "object",
  additionalProperties: false,
  required: ["status", "checks"],
  properties: {
    status: { enum: ["ready", "unavailable"] },
    checks: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "ok"],
        properties: {
          name: { type: "string", description: "The dependency (`database`, `redis`, `s3`)." },
          ok: { type: "boolean" },
        },
      },
    },
  },
} as const;
