/**
 * Admin API (`/admin/v1`) contracts: request JSON Schemas with their validators, the resources the
 * API answers with (types and schemas, for the OpenAPI document), and the naming rules
 * (slugs, reserved organization slugs, custom domains, identity-provider kinds).
 *
 * Validators return every problem at once as `{pointer, detail}` pairs; besides the schema they
 * check what JSON Schema cannot express (reserved slugs, unique identity-provider ids).
 */
import { compileValidator, type FieldError, type ValidationResult } from "./validation.js";
import { WORLD_QUOTAS_SCHEMA, WORLD_QUOTA_NAMES, WORLD_STORAGE_SCHEMA, type WorldQuotas, type WorldStorage } from "./world-quotas.schema.js";

/** Organization and world slugs: 1-63 lower-case letters, digits and inner hyphens (a DNS label). */
export const SLUG_PATTERN = "^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$";

/**
 * Organization slugs map-storage serves as its own top-level paths (`/healthz`, `/schemas/...`),
 * so no organization may take them. (`openapi.json` cannot match {@link SLUG_PATTERN}; it is listed
 * so the list names every reserved path.)
 */
export const RESERVED_ORGANIZATION_SLUGS = ["schemas", "healthz", "readyz", "admin", "metrics", "openapi.json"] as const;

/**
 * A custom domain: a lower-case DNS host name with at least two labels whose last label is not all
 * digits (so IP addresses are refused); no scheme, port, path or trailing dot.
 */
export const HOSTNAME_PATTERN =
  "^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\.)+(?=[a-z0-9-]*[a-z])[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$";

/** Login providers a world can offer. Only `openid-connect` ones can expose their access token. */
export const IDENTITY_PROVIDER_KINDS = ["openid-connect", "google", "microsoft", "discord", "github", "linkedin"] as const;
export type IdentityProviderKind = (typeof IDENTITY_PROVIDER_KINDS)[number];

/** The analytics categories of a world, each switchable on its own. */
export const ANALYTICS_CATEGORIES = ["presenceAndSessions", "collaboration", "workspaceActions", "qualityDiagnostics"] as const;
export type AnalyticsCategory = (typeof ANALYTICS_CATEGORIES)[number];

/** A world's analytics settings (all `true` for a new world). */
export interface WorldAnalytics {
  enabled: boolean;
  userLevelActivity: boolean;
  categories: Record<AnalyticsCategory, boolean>;
}

/** A partial {@link WorldAnalytics}: members given replace the stored ones, the others are kept. */
export interface WorldAnalyticsPatch {
  enabled?: boolean;
  userLevelActivity?: boolean;
  categories?: Partial<Record<AnalyticsCategory, boolean>>;
}

/** Analytics settings of a new world. */
export const DEFAULT_WORLD_ANALYTICS: Readonly<WorldAnalytics> = Object.freeze({
  enabled: true,
  userLevelActivity: true,
  categories: Object.freeze({ presenceAndSessions: true, collaboration: true, workspaceActions: true, qualityDiagnostics: true }),
});

/**
 * A login provider of a world. `exposeAccessToken` matters only for `openid-connect`: only those
 * providers ever have members' access tokens sent in `member.connecting`.
 */
export interface IdentityProvider {
  id: string;
  kind: IdentityProviderKind;
  exposeAccessToken: boolean;
}

/** `POST /admin/v1/organizations` */
export interface CreateOrganizationRequest {
  slug: string;
  name: string;
}

/** `POST /admin/v1/organizations/{org}/worlds` */
export interface CreateWorldRequest {
  slug: string;
  name: string;
  adminEmails: string[];
  customDomain?: string | null;
  analytics?: WorldAnalyticsPatch;
  identityProviders?: IdentityProviderInput[];
  /** Operator only. */
  quotas?: Partial<WorldQuotas>;
}

/** `PATCH /admin/v1/worlds/{org}/{world}`: members given change, others are kept. */
export interface UpdateWorldRequest {
  name?: string;
  adminEmails?: string[];
  /** `null` removes the custom domain. */
  customDomain?: string | null;
  /** Deep-merged into the stored settings. */
  analytics?: WorldAnalyticsPatch;
  /** Replaces the whole list. */
  identityProviders?: IdentityProviderInput[];
  /** Operator only; merged member by member (`null` restores the platform default). */
  quotas?: Partial<WorldQuotas>;
}

/** An identity provider as written by clients; `exposeAccessToken` defaults to `false`. */
export type IdentityProviderInput = Omit<IdentityProvider, "exposeAccessToken"> & { exposeAccessToken?: boolean };

/** `POST /admin/v1/worlds/{org}/{world}/api-keys` */
export interface CreateApiKeyRequest {
  name?: string | null;
}

/** An organization as the admin API returns it. Times are RFC 3339 strings. */
export interface OrganizationResource {
  id: string;
  slug: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

/** A world and its settings as the admin API returns them. */
export interface WorldResource {
  id: string;
  /** Slug of the organization. */
  organization: string;
  slug: string;
  name: string;
  adminEmails: string[];
  customDomain: string | null;
  /** `{PUBLIC_MAP_STORAGE_URL}/<organization>/<world>`: base address of the world's files. */
  mapStorageUrl: string;
  /** The world's address, the webhook envelope's `world.url`: `https://<customDomain>/`, else `{PLAY_URL}/@/<organization>/<world>`. */
  playUrl: string;
  /** What a room's path is appended to (`<roomUrlBase><path>.wam`): `{PLAY_URL}/@/<organization>/<world>/`, or `https://<customDomain>/@/`. */
  roomUrlBase: string;
  analytics: WorldAnalytics;
  identityProviders: IdentityProvider[];
  quotas: WorldQuotas;
  /** The world's files in map-storage: bytes in use (null until map-storage has counted them) and the quota they count against. */
  storage: WorldStorage;
  createdAt: string;
  updatedAt: string;
}

/** An API key as listed: never the token, never its hash. */
export interface ApiKeyResource {
  id: string;
  name: string | null;
  /** First characters of the token, to tell keys apart. */
  tokenPrefix: string;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

/** Answer to creating an API key: the only time the token is shown. */
export interface CreatedApiKeyResource {
  id: string;
  name: string | null;
  token: string;
  tokenPrefix: string;
  mapStorageUrl: string;
  createdAt: string;
}

/** A page of a list; `nextCursor` is `null` on the last page. */
export interface ListResource<T> {
  items: T[];
  nextCursor: string | null;
}

// ---- JSON Schemas -------------------------------------------------------------------------------

const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

const slugSchema = {
  type: "string",
  pattern: SLUG_PATTERN,
  description: "1-63 lower-case letters, digits or hyphens; no hyphen first or last.",
} as const;

const nameSchema = { type: "string", minLength: 1, maxLength: 200, pattern: "\\S", description: "Display name." } as const;

const adminEmailsSchema = {
  type: "array",
  description: "Who receives the world's administrative e-mails (for example endpoint disabling).",
  minItems: 1,
  maxItems: 50,
  uniqueItems: true,
  items: { type: "string", format: "email", maxLength: 254 },
} as const;

const customDomainSchema = {
  type: ["string", "null"],
  pattern: HOSTNAME_PATTERN,
  description: "Lower-case host name serving the world's rooms (`https://<customDomain>/@/<path>.wam`); unique across worlds.",
} as const;

const analyticsCategoriesPatchSchema = {
  type: "object",
  additionalProperties: false,
  properties: Object.fromEntries(ANALYTICS_CATEGORIES.map((c) => [c, { type: "boolean" }])),
} as const;

/** Schema of a partial analytics settings object (PATCH). */
export const WORLD_ANALYTICS_PATCH_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    enabled: { type: "boolean", description: "Master switch: no analytics at all when false." },
    userLevelActivity: { type: "boolean", description: "Whether events carry the member's identity." },
    categories: analyticsCategoriesPatchSchema,
  },
} as const;

/** Schema of complete analytics settings (responses). */
export const WORLD_ANALYTICS_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["enabled", "userLevelActivity", "categories"],
  properties: {
    enabled: { type: "boolean" },
    userLevelActivity: { type: "boolean" },
    categories: { ...analyticsCategoriesPatchSchema, required: [...ANALYTICS_CATEGORIES] },
  },
} as const;

const identityProviderInputSchema = {
  type: "object",
  additionalProperties: false,
  required: ["id", "kind"],
  properties: {
    id: { ...slugSchema, description: "Identifier of the provider within the world; unique in the list." },
    kind: { enum: [...IDENTITY_PROVIDER_KINDS] },
    exposeAccessToken: {
      type: "boolean",
      default: false,
      description: "Send members' access tokens in `member.connecting`; honoured for `openid-connect` only.",
    },
  },
} as const;

const identityProvidersInputSchema = { type: "array", maxItems: 20, items: identityProviderInputSchema } as const;

/** Schema of an identity provider in responses. */
export const IDENTITY_PROVIDER_SCHEMA = {
  ...identityProviderInputSchema,
  required: ["id", "kind", "exposeAccessToken"],
} as const;

export const CREATE_ORGANIZATION_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:create-organization-request",
  title: "Create organization",
  type: "object",
  additionalProperties: false,
  required: ["slug", "name"],
  properties: {
    slug: { ...slugSchema, description: `${slugSchema.description} Reserved: ${RESERVED_ORGANIZATION_SLUGS.join(", ")}.` },
    name: nameSchema,
  },
} as const;

export const CREATE_WORLD_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:create-world-request",
  title: "Create world",
  type: "object",
  additionalProperties: false,
  required: ["slug", "name", "adminEmails"],
  properties: {
    slug: { ...slugSchema, description: `${slugSchema.description} Unique within the organization.` },
    name: nameSchema,
    adminEmails: adminEmailsSchema,
    customDomain: customDomainSchema,
    analytics: WORLD_ANALYTICS_PATCH_SCHEMA,
    identityProviders: identityProvidersInputSchema,
    quotas: WORLD_QUOTAS_SCHEMA,
  },
} as const;

export const UPDATE_WORLD_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:update-world-request",
  title: "Update world settings",
  description:
    "Members present are changed, others kept. `customDomain: null` removes the domain; `analytics` and `quotas` are merged member by member; `identityProviders` replaces the list. `adminEmails`, `customDomain` and `quotas` are the operator's (ADMIN_TOKEN): a dashboard session sending any of them gets 403.",
  type: "object",
  additionalProperties: false,
  properties: {
    name: nameSchema,
    adminEmails: { ...adminEmailsSchema, description: `${adminEmailsSchema.description} Operator only.` },
    customDomain: { ...customDomainSchema, description: `${customDomainSchema.description} Operator only: bind a domain after verifying the world owns it.` },
    analytics: WORLD_ANALYTICS_PATCH_SCHEMA,
    identityProviders: identityProvidersInputSchema,
    quotas: WORLD_QUOTAS_SCHEMA,
  },
} as const;

export const CREATE_API_KEY_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:create-api-key-request",
  title: "Create API key",
  type: "object",
  additionalProperties: false,
  properties: {
    name: { type: ["string", "null"], maxLength: 200, description: "A label to recognise the key by (where it is used)." },
  },
} as const;

const dateTime = { type: "string", format: "date-time" } as const;
const nullableDateTime = { type: ["string", "null"], format: "date-time" } as const;
const uuid = { type: "string", format: "uuid" } as const;

export const ORGANIZATION_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:organization",
  title: "Organization",
  type: "object",
  additionalProperties: false,
  required: ["id", "slug", "name", "createdAt", "updatedAt"],
  properties: { id: uuid, slug: slugSchema, name: { type: "string" }, createdAt: dateTime, updatedAt: dateTime },
} as const;

export const WORLD_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:world",
  title: "World",
  type: "object",
  additionalProperties: false,
  required: [
    "id",
    "organization",
    "slug",
    "name",
    "adminEmails",
    "customDomain",
    "mapStorageUrl",
    "playUrl",
    "roomUrlBase",
    "analytics",
    "identityProviders",
    "quotas",
    "storage",
    "createdAt",
    "updatedAt",
  ],
  properties: {
    id: uuid,
    organization: { ...slugSchema, description: "Slug of the organization." },
    slug: slugSchema,
    name: { type: "string" },
    adminEmails: { type: "array", items: { type: "string" } },
    customDomain: customDomainSchema,
    mapStorageUrl: { type: "string", format: "uri", description: "`{PUBLIC_MAP_STORAGE_URL}/<organization>/<world>`" },
    playUrl: {
      type: "string",
      format: "uri",
      description:
        "The world's address, the same string as `world.url` in its webhooks: `https://<customDomain>/`, else " +
        "`{PLAY_URL}/@/<organization>/<world>`. Rooms are at `{PLAY_URL}/@/<organization>/<world>/<path>.wam` " +
        "(`https://<customDomain>/@/<path>.wam`).",
    },
    roomUrlBase: {
      type: "string",
      format: "uri",
      description: "Room URLs are `<roomUrlBase><path>.wam`: `{PLAY_URL}/@/<organization>/<world>/`, or `https://<customDomain>/@/`.",
    },
    analytics: WORLD_ANALYTICS_SCHEMA,
    identityProviders: { type: "array", items: IDENTITY_PROVIDER_SCHEMA },
    quotas: { ...WORLD_QUOTAS_SCHEMA, required: [...WORLD_QUOTA_NAMES] },
    storage: WORLD_STORAGE_SCHEMA,
    createdAt: dateTime,
    updatedAt: dateTime,
  },
} as const;

export const API_KEY_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:api-key",
  title: "API key (listed)",
  type: "object",
  additionalProperties: false,
  required: ["id", "name", "tokenPrefix", "createdAt", "revokedAt", "lastUsedAt"],
  properties: {
    id: uuid,
    name: { type: ["string", "null"] },
    tokenPrefix: { type: "string" },
    createdAt: dateTime,
    revokedAt: nullableDateTime,
    lastUsedAt: nullableDateTime,
  },
} as const;

export const CREATED_API_KEY_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:created-api-key",
  title: "API key (just created)",
  type: "object",
  additionalProperties: false,
  required: ["id", "name", "token", "tokenPrefix", "mapStorageUrl", "createdAt"],
  properties: {
    id: uuid,
    name: { type: ["string", "null"] },
    token: { type: "string", description: "`vwk_` + base64url of 32 random bytes; shown only in this answer." },
    tokenPrefix: { type: "string" },
    mapStorageUrl: { type: "string", format: "uri" },
    createdAt: dateTime,
  },
} as const;

// ---- Validators ---------------------------------------------------------------------------------

/** Human wording for the patterns above, instead of ajv's "must match the pattern <regex>". */
const PATTERN_WORDING: ReadonlyArray<[string, string]> = [
  [SLUG_PATTERN, "must be 1-63 lower-case letters, digits or hyphens, not starting or ending with a hyphen"],
  [HOSTNAME_PATTERN, "must be a lower-case host name such as play.example.com (no scheme, port, path or IP address)"],
  ["\\S", "must not be blank"],
];

function reword(errors: FieldError[]): FieldError[] {
  return errors.map((e) => {
    const wording = PATTERN_WORDING.find(([pattern]) => e.detail === `must match the pattern ${pattern}`);
    return wording ? { pointer: e.pointer, detail: wording[1] } : e;
  });
}

/** A schema validator followed by checks JSON Schema cannot express; all errors are reported. */
function validator<T>(schema: object, check: (value: T) => FieldError[] = () => []): (data: unknown) => ValidationResult<T> {
  const validate = compileValidator<T>(schema);
  return (data) => {
    const result = validate(data);
    if (!result.ok) return { ok: false, errors: reword(result.errors) };
    const errors = check(result.value);
    return errors.length > 0 ? { ok: false, errors } : result;
  };
}

function identityProviderIdErrors(providers: IdentityProviderInput[] | undefined): FieldError[] {
  const firstIndex = new Map<string, number>();
  const errors: FieldError[] = [];
  (providers ?? []).forEach((provider, index) => {
    const first = firstIndex.get(provider.id);
    if (first === undefined) firstIndex.set(provider.id, index);
    else errors.push({ pointer: `/identityProviders/${index}/id`, detail: `duplicates /identityProviders/${first}/id ("${provider.id}")` });
  });
  return errors;
}

/** True when `slug` is one of {@link RESERVED_ORGANIZATION_SLUGS}. */
export function isReservedOrganizationSlug(slug: string): boolean {
  return (RESERVED_ORGANIZATION_SLUGS as readonly string[]).includes(slug);
}

export const validateCreateOrganizationRequest = validator<CreateOrganizationRequest>(CREATE_ORGANIZATION_REQUEST_SCHEMA, (value) =>
  isReservedOrganizationSlug(value.slug)
    ? [{ pointer: "/slug", detail: `is reserved ("/${value.slug}" is a path of map-storage itself); choose another slug` }]
    : [],
);

export const validateCreateWorldRequest = validator<CreateWorldRequest>(CREATE_WORLD_REQUEST_SCHEMA, (value) =>
  identityProviderIdErrors(value.identityProviders),
);

export const validateUpdateWorldRequest = validator<UpdateWorldRequest>(UPDATE_WORLD_REQUEST_SCHEMA, (value) =>
  identityProviderIdErrors(value.identityProviders),
);

export const validateCreateApiKeyRequest = validator<CreateApiKeyRequest>(CREATE_API_KEY_REQUEST_SCHEMA);
