/**
 * Event intake (`event-ingest`, `/v1`) contracts: the request shapes its validators compile and the
 * answers it sends, as JSON Schemas the OpenAPI document references.
 */
import { SLUG_PATTERN } from "./admin.schema.js";
import { compileValidator, type FieldError, type ValidationResult } from "./validation.js";

const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

const SLUG_BODY = SLUG_PATTERN.replace(/^\^/, "").replace(/\$$/, "");

/** `<organization>/<world>`: two slugs; the groups capture them. */
export const WORLD_REFERENCE_PATTERN = `^(${SLUG_BODY})/(${SLUG_BODY})$`;

/** Longest accepted producer `id`, in characters. */
export const MAX_EVENT_ID_LENGTH = 200;

/** Most access tokens in one auth-hook request: one per identity provider a member can sign in with. */
export const MAX_ACCESS_TOKENS = 20;

const worldReference = {
  type: "string",
  pattern: WORLD_REFERENCE_PATTERN,
  description: "`<organization>/<world>`: the two slugs.",
} as const;

const timestamp = {
  type: "string",
  format: "date-time",
  description:
    "When it happened: an RFC 3339 date-time with a time-zone offset or `Z`, between 1970 and 9999 (no leap second). " +
    "Stored and delivered as the UTC instant with milliseconds.",
} as const;

/**
 * The members of one event of `POST /v1/events` and their types. The service checks what this
 * schema words badly (the world reference, the type against the catalogue, the data against its
 * type's schema) with messages of its own.
 */
export const INTAKE_EVENT_SHAPE_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:ingest:v1:event",
  title: "Event",
  type: "object",
  additionalProperties: false,
  required: ["id", "world", "type", "timestamp", "data"],
  properties: {
    id: { type: "string", minLength: 1, maxLength: MAX_EVENT_ID_LENGTH, description: "The producer's id: the deduplication key within the world." },
    world: { type: "string", description: worldReference.description },
    type: { type: "string", description: "One of the intake event types." },
    timestamp,
    data: { type: "object", description: "The payload, valid against its type's schema." },
  },
} as const;

/** One access token of the member, from one identity provider. */
export interface AuthHookAccessToken {
  provider: string;
  token: string;
}

/** What the platform's access check sends to `POST /v1/auth-hook`. */
export interface AuthHookRequestBody {
  world: string;
  roomUrl: string;
  uuid: string;
  /** Absent for an anonymous member: the same as `[]`. */
  accessTokens?: AuthHookAccessToken[];
}

/** JSON Schema of {@link AuthHookRequestBody}. */
export const AUTH_HOOK_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:ingest:v1:auth-hook-request",
  title: "Member connecting",
  type: "object",
  additionalProperties: false,
  required: ["world", "roomUrl", "uuid"],
  properties: {
    world: worldReference,
    roomUrl: { type: "string", format: "uri", maxLength: 2048, description: "The room the member is entering." },
    uuid: { type: "string", minLength: 1, maxLength: 200, description: "The member's (or visitor's) stable id." },
    accessTokens: {
      type: "array",
      maxItems: MAX_ACCESS_TOKENS,
      description: "The member's access tokens, one per identity provider; omitted or `[]` for an anonymous member.",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["provider", "token"],
        properties: {
          provider: { type: "string", minLength: 1, maxLength: 200, description: "Id of the world's identity provider." },
          token: { type: "string", minLength: 1, maxLength: 16_384 },
        },
      },
    },
  },
} as const;

const validateAuthHookBody = compileValidator<AuthHookRequestBody>(AUTH_HOOK_REQUEST_SCHEMA);

/** An auth-hook request after validation: `accessTokens` always present, the world's two slugs split out. */
export interface ValidAuthHookRequest extends Required<AuthHookRequestBody> {
  organizationSlug: string;
  worldSlug: string;
}

/** Validates an auth-hook body; the errors point into it. An omitted `accessTokens` becomes `[]`. */
export function validateAuthHookRequest(body: unknown): ValidationResult<ValidAuthHookRequest> {
  const result = validateAuthHookBody(body);
  if (!result.ok) return result;
  const match = new RegExp(WORLD_REFERENCE_PATTERN).exec(result.value.world);
  if (!match?.[1] || !match[2]) {
    const errors: FieldError[] = [{ pointer: "/world", detail: "must be <organization>/<world>" }];
    return { ok: false, errors };
  }
  return {
    ok: true,
    value: { ...result.value, accessTokens: result.value.accessTokens ?? [], organizationSlug: match[1], worldSlug: match[2] },
  };
}

/** Answer of `POST /v1/events`. */
export const INGEST_RESULT_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:ingest:v1:ingest-result",
  title: "Events accepted",
  type: "object",
  additionalProperties: false,
  required: ["accepted", "duplicates", "deliveries"],
  properties: {
    accepted: { type: "integer", minimum: 0, description: "Events seen for the first time." },
    duplicates: { type: "integer", minimum: 0, description: "Events whose id was already known in their world (or repeated within the request)." },
    deliveries: { type: "integer", minimum: 0, description: "Deliveries created for the accepted events." },
  },
} as const;

/** Answer of `POST /v1/analytics`. */
export const ANALYTICS_INTAKE_RESULT_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:ingest:v1:analytics-result",
  title: "Analytics events accepted",
  type: "object",
  additionalProperties: false,
  required: ["accepted", "dropped", "endpoints"],
  properties: {
    accepted: { type: "integer", minimum: 0, description: "Events kept after the world's privacy settings, buffered for each subscribed endpoint." },
    dropped: { type: "integer", minimum: 0, description: "Events dropped by the world's settings (analytics off, category off)." },
    endpoints: { type: "integer", minimum: 0, description: "Endpoints the accepted events were buffered for." },
  },
} as const;

/** Values of a result's `error` in the auth hook's answer. */
export const AUTH_HOOK_ERRORS = ["timeout", "connection", "refused-by-policy", "redirect", "secret-unavailable", "not-reached"] as const;
export type AuthHookError = (typeof AUTH_HOOK_ERRORS)[number];

/** Answer of `POST /v1/auth-hook`. */
export const AUTH_HOOK_RESPONSE_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:ingest:v1:auth-hook-response",
  title: "Auth hook results",
  type: "object",
  additionalProperties: false,
  required: ["results"],
  properties: {
    results: {
      type: "array",
      description:
        "One entry per enabled `auth` endpoint of the world, in call order. Those not reached within AUTH_HOOK_TIMEOUT_MS " +
        "(the budget of the whole answer) come last, with `error: \"not-reached\"`: they are called after this answer, one " +
        "after another, and their results are in the delivery history.",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["endpointId", "status", "durationMs"],
        properties: {
          endpointId: { type: "string", format: "uuid" },
          status: { type: ["integer", "null"], description: "The receiver's HTTP status; null when there was none (or it was not reached)." },
          durationMs: { type: "number", minimum: 0, description: "How long the call took; 0 when it was not reached." },
          error: {
            type: "string",
            enum: [...AUTH_HOOK_ERRORS],
            description:
              "Why there was no HTTP status: `timeout` (no answer within what was left of the budget), `connection`, " +
              "`refused-by-policy`, `redirect`, `secret-unavailable`; or `not-reached`: not called before the budget ran out, " +
              "called after this answer instead.",
          },
        },
      },
    },
  },
} as const;
