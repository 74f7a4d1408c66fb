/**
 * Custom headers of a webhook endpoint (`headers` on create and PATCH): what a receiver behind an
 * API gateway needs before its code can check a signature (a static `Authorization`, a tenant
 * header). The rules live here once: the admin API validates with them, the delivery transport
 * (`sendAttempt` of @vw/webhook-core) never lets a reserved name through, and the OpenAPI
 * document shows them.
 */
import type { FieldError } from "./field-error.js";
import { escapePointerToken } from "./validation.js";

/** Most custom headers per endpoint. */
export const MAX_ENDPOINT_HEADERS = 10;

/** Longest value, in characters. */
export const MAX_ENDPOINT_HEADER_VALUE_LENGTH = 1024;

/** Longest name, in characters (our bound: no gateway expects a longer one). */
export const MAX_ENDPOINT_HEADER_NAME_LENGTH = 256;

/** RFC 9110 `token`: the characters of a field name. */
export const HEADER_NAME_PATTERN = "^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$";

/** Visible ASCII and spaces: no CR, LF, tab or other control character, nothing outside ASCII. */
export const HEADER_VALUE_PATTERN = "^[\\x20-\\x7E]*$";

/**
 * Names the platform sets or that change how the message is framed, in lower case. The issue's
 * list (Host, Content-Type, Content-Length, Transfer-Encoding, Connection, TE, Upgrade,
 * User-Agent and the three Standard Webhooks headers) plus, our choice, what the transport also
 * owns: `Accept-Encoding` (it decodes only what it asks for), `Expect`, `Keep-Alive` and
 * `Trailer`. Every `Proxy-*` name is reserved too ({@link isReservedHeaderName}).
 */
export const RESERVED_HEADER_NAMES: readonly string[] = [
  "host",
  "content-type",
  "content-length",
  "transfer-encoding",
  "connection",
  "te",
  "upgrade",
  "user-agent",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  "accept-encoding",
  "expect",
  "keep-alive",
  "trailer",
];

const RESERVED = new Set(RESERVED_HEADER_NAMES);

/** True for a name an endpoint may not set (any case): {@link RESERVED_HEADER_NAMES} and every `Proxy-*`. */
export function isReservedHeaderName(name: string): boolean {
  const lower = name.toLowerCase();
  return RESERVED.has(lower) || lower.startsWith("proxy-");
}

/** The custom headers of an endpoint: name as the customer wrote it, value sent as it is. */
export type EndpointHeaders = Record<string, string>;

/** JSON Schema of `headers` in requests: the shape, the character rules and the bounds. */
export const ENDPOINT_HEADERS_SCHEMA = {
  type: "object",
  maxProperties: MAX_ENDPOINT_HEADERS,
  // The pattern's `+` refuses an empty name.
  propertyNames: { maxLength: MAX_ENDPOINT_HEADER_NAME_LENGTH, pattern: HEADER_NAME_PATTERN },
  additionalProperties: { type: "string", maxLength: MAX_ENDPOINT_HEADER_VALUE_LENGTH, pattern: HEADER_VALUE_PATTERN },
  description:
    `Headers added to every delivery and Test sent to this endpoint, such as a static \`Authorization\` for an API gateway in front of the receiver. ` +
    `At most ${MAX_ENDPOINT_HEADERS}; names are RFC 9110 tokens, each used once whatever its case; values are visible ASCII and spaces, ` +
    `at most ${MAX_ENDPOINT_HEADER_VALUE_LENGTH} characters. Reserved names are refused: ${RESERVED_HEADER_NAMES.join(", ")} and every Proxy-* name. ` +
    "On PATCH the object replaces the whole set; `{}` removes every header. Values are write-only: stored encrypted, never shown again " +
    "(reads give `headerNames`; the delivery history shows each name with the value `[redacted]`). The signature is unchanged: it covers the body.",
  examples: [{ Authorization: "Bearer gateway-token", "X-Tenant": "acme" }],
} as const;

/** JSON Schema of `headerNames` in an endpoint resource. */
export const ENDPOINT_HEADER_NAMES_SCHEMA = {
  type: "array",
  maxItems: MAX_ENDPOINT_HEADERS,
  items: { type: "string" },
  description: "Names of the endpoint's custom headers, sorted case-insensitively; their values are never shown.",
} as const;

/**
 * The rules the JSON Schema cannot say: a reserved name, and a name given twice in different
 * cases (HTTP names are case-insensitive). One error per offending header, pointing at it
 * (`/headers/<name>` under `base`).
 */
export function endpointHeadersErrors(headers: EndpointHeaders, base = "/headers"): FieldError[] {
  const errors: FieldError[] = [];
  const seen = new Map<string, string>();
  for (const name of Object.keys(headers)) {
    const pointer = `${base}/${escapePointerToken(name)}`;
    const lower = name.toLowerCase();
    if (isReservedHeaderName(name)) {
      // The whole list is in the schema's description (the OpenAPI document); here, the one header at fault.
      errors.push({ pointer, detail: `"${name}" is reserved: the platform sets it, or it changes how the request is sent` });
    } else if (seen.has(lower)) {
      errors.push({ pointer, detail: `"${name}" repeats "${seen.get(lower) ?? ""}": header names are case-insensitive, give each once` });
    }
    seen.set(lower, seen.get(lower) ?? name);
  }
  return errors;
}

/** The names of a header set as reads show them: sorted case-insensitively (names are ASCII: code-point order, no locale). */
export function headerNamesOf(headers: EndpointHeaders): string[] {
  const order = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  return Object.keys(headers).sort((a, b) => order(a.toLowerCase(), b.toLowerCase()) || order(a, b));
}
