/**
 * Webhook endpoint contracts of the admin API (`/admin/v1/worlds/{org}/{world}/endpoints`):
 * the subscription names, body formats, disabling reasons and current `apiVersion`, the request
 * JSON Schemas with their validators, and the endpoint resource (type and schema).
 *
 * The URL rules of `ENDPOINT_URL_POLICY` (https, public addresses) need DNS, so they are not
 * here: the schema only bounds the member, the admin API applies the policy.
 */
import { ENDPOINT_HEADER_NAMES_SCHEMA, ENDPOINT_HEADERS_SCHEMA, type EndpointHeaders } from "./endpoint-headers.schema.js";
import { compileValidator, type ValidationResult } from "./validation.js";

/** What an endpoint can subscribe to (spec: Webhook endpoint > subscriptions), in canonical order. */
export const WEBHOOK_SUBSCRIPTIONS = ["recording", "visitor", "consent", "analytics", "auth"] as const;
export type WebhookSubscription = (typeof WEBHOOK_SUBSCRIPTIONS)[number];

/** Body format of an endpoint's deliveries: `current` (the envelope) or `legacy` (flat body). */
export const ENDPOINT_FORMATS = ["current", "legacy"] as const;
export type EndpointFormat = (typeof ENDPOINT_FORMATS)[number];

/**
 * Why an endpoint is disabled: `manual` (the owner), `gone` (a receiver answered 410),
 * `failures` (too many consecutive failed attempts, `DISABLE_AFTER_FAILURES`).
 */
export const ENDPOINT_DISABLED_REASONS = ["manual", "gone", "failures"] as const;
export type EndpointDisabledReason = (typeof ENDPOINT_DISABLED_REASONS)[number];

/**
 * The `apiVersion` given to endpoints created now; an endpoint keeps the value it was created
 * with for ever (spec: Versioning). Change it only with a new payload shape.
 */
export const CURRENT_API_VERSION = "2026-11-01";

/** Highest accepted `rateLimitPerSecond` (a sanity bound: above it, throttling means nothing). */
export const RATE_LIMIT_PER_SECOND_MAX = 100_000;

/** Longest accepted endpoint URL, in characters. */
export const ENDPOINT_URL_MAX_LENGTH = 2048;

/** Puts subscriptions in {@link WEBHOOK_SUBSCRIPTIONS} order, which is how they are stored and shown. */
export function canonicalSubscriptions(subscriptions: readonly WebhookSubscription[]): WebhookSubscription[] {
  return WEBHOOK_SUBSCRIPTIONS.filter((s) => subscriptions.includes(s));
}

/** `POST .../endpoints` */
export interface CreateEndpointRequest {
  url: string;
  subscriptions: WebhookSubscription[];
  /** Most deliveries started per second, across all workers; absent or null = no throttle. */
  rateLimitPerSecond?: number | null;
  /** Custom headers of every delivery (see endpoint-headers.schema.ts); absent = none. */
  headers?: EndpointHeaders;
}

/** `PATCH .../endpoints/{id}`: members given replace the stored ones. */
export interface UpdateEndpointRequest {
  url?: string;
  subscriptions?: WebhookSubscription[];
  /** A number sets the throttle, null removes it. */
  rateLimitPerSecond?: number | null;
  /** Replaces the whole set of custom headers; `{}` removes them all. */
  headers?: EndpointHeaders;
}

/** `PUT .../endpoints/{id}/format` */
export interface SetEndpointFormatRequest {
  format: EndpointFormat;
}

/** `POST .../endpoints/import-legacy`: the former single-URL setting of a world. */
export interface ImportLegacyEndpointRequest {
  url: string;
}

/** A webhook endpoint as the admin API returns it: never its secret. Times are RFC 3339. */
export interface EndpointResource {
  id: string;
  url: string;
  subscriptions: WebhookSubscription[];
  enabled: boolean;
  format: EndpointFormat;
  /** Frozen when the endpoint was created. */
  apiVersion: string;
  /** Whether deliveries are signed; false only for a legacy endpoint imported without a secret. */
  hasSecret: boolean;
  /** Set while disabled, `null` while enabled. */
  disabledReason: EndpointDisabledReason | null;
  disabledAt: string | null;
  /** Most deliveries started per second, across all workers; null = no throttle. */
  rateLimitPerSecond: number | null;
  /** Names of the custom headers, sorted case-insensitively; values are never shown. */
  headerNames: string[];
  createdAt: string;
  updatedAt: string;
}

/** Answer to creating an endpoint or rotating its secret: the only places the secret appears. */
export interface EndpointWithSecretResource extends EndpointResource {
  /** `whsec_` + base64 of 24-64 random bytes. */
  secret: string;
}

// ---- JSON Schemas -------------------------------------------------------------------------------

const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

const urlSchema = {
  type: "string",
  minLength: 1,
  maxLength: ENDPOINT_URL_MAX_LENGTH,
  description:
    "Absolute URL the deliveries are POSTed to. Under ENDPOINT_URL_POLICY=public-https (the default): https, no credentials, " +
    "and every address the host resolves to public. Stored in its normalised (WHATWG) form.",
} as const;

const subscriptionsSchema = {
  type: "array",
  minItems: 1,
  maxItems: WEBHOOK_SUBSCRIPTIONS.length,
  uniqueItems: true,
  items: { enum: [...WEBHOOK_SUBSCRIPTIONS] },
  description: "Event kinds delivered to the endpoint; at least one, no repeats. Shown in canonical order.",
} as const;

const rateLimitSchema = {
  type: ["integer", "null"],
  minimum: 1,
  maximum: RATE_LIMIT_PER_SECOND_MAX,
  description:
    "Most deliveries started per second for this endpoint, across all delivery workers together (an integer >= 1); null for no " +
    "throttle. Deliveries beyond it wait their turn; nothing is dropped and the retry schedule is unchanged.",
} as const;

const formatSchema = { enum: [...ENDPOINT_FORMATS], description: "`current` (envelope) or `legacy` (flat body)." } as const;

export const CREATE_ENDPOINT_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:create-endpoint-request",
  title: "Create webhook endpoint",
  type: "object",
  additionalProperties: false,
  required: ["url", "subscriptions"],
  properties: { url: urlSchema, subscriptions: subscriptionsSchema, rateLimitPerSecond: rateLimitSchema, headers: ENDPOINT_HEADERS_SCHEMA },
} as const;

export const UPDATE_ENDPOINT_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:update-endpoint-request",
  title: "Edit webhook endpoint",
  description: "Members present replace the stored ones; `apiVersion`, format, secret and state are changed by their own actions.",
  type: "object",
  additionalProperties: false,
  properties: { url: urlSchema, subscriptions: subscriptionsSchema, rateLimitPerSecond: rateLimitSchema, headers: ENDPOINT_HEADERS_SCHEMA },
} as const;

export const SET_ENDPOINT_FORMAT_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:set-endpoint-format-request",
  title: "Switch body format",
  type: "object",
  additionalProperties: false,
  required: ["format"],
  properties: { format: formatSchema },
} as const;

export const IMPORT_LEGACY_ENDPOINT_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:import-legacy-endpoint-request",
  title: "Import the legacy single-URL endpoint",
  description: "Creates a `legacy` endpoint subscribed to `auth`, without a secret (its deliveries are unsigned until a secret is generated).",
  type: "object",
  additionalProperties: false,
  required: ["url"],
  properties: { url: urlSchema },
} as const;

const dateTime = { type: "string", format: "date-time" } as const;

const endpointProperties = {
  id: { type: "string", format: "uuid" },
  url: { type: "string" },
  subscriptions: { type: "array", minItems: 1, items: { enum: [...WEBHOOK_SUBSCRIPTIONS] } },
  enabled: { type: "boolean" },
  format: formatSchema,
  apiVersion: { type: "string", pattern: "^\\d{4}-\\d{2}-\\d{2}$", description: "Frozen when the endpoint was created." },
  hasSecret: { type: "boolean", description: "False only for a legacy endpoint imported without a secret (unsigned deliveries)." },
  disabledReason: { enum: [...ENDPOINT_DISABLED_REASONS, null], description: "Why it is disabled; null while enabled." },
  disabledAt: { type: ["string", "null"], format: "date-time" },
  rateLimitPerSecond: rateLimitSchema,
  headerNames: ENDPOINT_HEADER_NAMES_SCHEMA,
  createdAt: dateTime,
  updatedAt: dateTime,
} as const;

const endpointRequired = [
  "id",
  "url",
  "subscriptions",
  "enabled",
  "format",
  "apiVersion",
  "hasSecret",
  "disabledReason",
  "disabledAt",
  "rateLimitPerSecond",
  "headerNames",
  "createdAt",
  "updatedAt",
] as const;

export const ENDPOINT_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:endpoint",
  title: "Webhook endpoint",
  type: "object",
  additionalProperties: false,
  required: [...endpointRequired],
  properties: endpointProperties,
} as const;

export const ENDPOINT_WITH_SECRET_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:endpoint-with-secret",
  title: "Webhook endpoint with its secret (creation, rotation)",
  type: "object",
  additionalProperties: false,
  required: [...endpointRequired, "secret"],
  properties: {
    ...endpointProperties,
    secret: { type: "string", pattern: "^whsec_[A-Za-z0-9+/]+={0,2}$", description: "`whsec_` + base64 of 24-64 random bytes; shown only in this answer." },
  },
} as const;

// ---- Validators ---------------------------------------------------------------------------------

export const validateCreateEndpointRequest: (data: unknown) => ValidationResult<CreateEndpointRequest> =
  compileValidator<CreateEndpointRequest>(CREATE_ENDPOINT_REQUEST_SCHEMA);

export const validateUpdateEndpointRequest: (data: unknown) => ValidationResult<UpdateEndpointRequest> =
  compileValidator<UpdateEndpointRequest>(UPDATE_ENDPOINT_REQUEST_SCHEMA);

export const validateSetEndpointFormatRequest: (data: unknown) => ValidationResult<SetEndpointFormatRequest> =
  compileValidator<SetEndpointFormatRequest>(SET_ENDPOINT_FORMAT_REQUEST_SCHEMA);

export const validateImportLegacyEndpointRequest: (data: unknown) => ValidationResult<ImportLegacyEndpointRequest> =
  compileValidator<ImportLegacyEndpointRequest>(IMPORT_LEGACY_ENDPOINT_REQUEST_SCHEMA);
