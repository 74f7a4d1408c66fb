/**
 * The body of `POST /v1/auth-hook`: `{world: "<org>/<world>", roomUrl, uuid, accessTokens:
 * [{provider, token}]}`. Validation reports every invalid member at once, as JSON pointers into
 * the request (`/accessTokens/1/token`).
 */
import { SLUG_PATTERN, compileValidator, type FieldError, type ValidationResult } from "@vw/contracts";

/** Most access tokens in one request: one per identity provider a member can sign in with. */
export const MAX_ACCESS_TOKENS = 20;

/** What the platform's access check sends. */
export interface AuthHookBody {
  world: string;
  roomUrl: string;
  uuid: string;
  accessTokens: { provider: string; token: string }[];
}

/** A validated request, with the world's two slugs. */
export interface AuthHookRequest extends AuthHookBody {
  organizationSlug: string;
  worldSlug: string;
}

const SLUG_BODY = SLUG_PATTERN.replace(/^\^/, "").replace(/\$$/, "");
const WORLD_REF_RE = new RegExp(`^(${SLUG_BODY})/(${SLUG_BODY})$`);

/** JSON Schema of {@link AuthHookBody} (no `$id`: it is compiled on the shared ajv instance). */
export const AUTH_HOOK_REQUEST_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["world", "roomUrl", "uuid", "accessTokens"],
  properties: {
    world: { type: "string", pattern: WORLD_REF_RE.source },
    roomUrl: { type: "string", format: "uri", maxLength: 2048 },
    uuid: { type: "string", minLength: 1, maxLength: 200 },
    accessTokens: {
      type: "array",
      maxItems: MAX_ACCESS_TOKENS,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["provider", "token"],
        properties: {
          provider: { type: "string", minLength: 1, maxLength: 200 },
          token: { type: "string", minLength: 1, maxLength: 16_384 },
        },
      },
    },
  },
} as const;

const validateBody = compileValidator<AuthHookBody>(AUTH_HOOK_REQUEST_SCHEMA);

/** Validates a request body; the errors point into it. */
export function parseAuthHookRequest(body: unknown): ValidationResult<AuthHookRequest> {
  const result = validateBody(body);
  if (!result.ok) return result;
  const match = WORLD_REF_RE.exec(result.value.world);
  if (!match?.[1] || !match[2]) {
    const errors: FieldError[] = [{ pointer: "/world", detail: "must be <organization>/<world>" }];
    return { ok: false, errors };
  }
  return { ok: true, value: { ...result.value, organizationSlug: match[1], worldSlug: match[2] } };
}
