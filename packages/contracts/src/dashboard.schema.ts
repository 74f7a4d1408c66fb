/**
 * Developers-dashboard contracts: the capabilities of a dashboard session, the bodies
 * of the session routes (minting by the platform, the page's one-time code exchange) and of the
 * endpoint recover route, with their validators and the resources answered.
 */
import { compileValidator, type ValidationResult } from "./validation.js";

/**
 * What a dashboard session may do. `view` (every read) is implied by any other;
 * `manage-endpoints`: create, edit, delete, disable, enable, rotate, format of endpoints and the
 * world's settings; `manage-api-keys`: create and revoke API keys; `send`: Test, Replay, recover.
 */
export const DASHBOARD_CAPABILITIES = ["view", "manage-endpoints", "manage-api-keys", "send"] as const;
export type DashboardCapability = (typeof DASHBOARD_CAPABILITIES)[number];

/** Session lifetime when `ttlSeconds` is not given (1 h). */
export const DEFAULT_DASHBOARD_SESSION_TTL_SECONDS = 3600;
/** Longest session lifetime (24 h). */
export const MAX_DASHBOARD_SESSION_TTL_SECONDS = 86_400;
/** Shortest session lifetime: a session must outlive the time it takes to open its link. */
export const MIN_DASHBOARD_SESSION_TTL_SECONDS = 60;
/** How long a one-time link can be opened after it was minted (10 minutes). */
export const DASHBOARD_CODE_TTL_SECONDS = 600;

/** `POST /admin/v1/worlds/{org}/{world}/dashboard-sessions` body. */
export interface CreateDashboardSessionRequest {
  /** Default: all four. `view` is added when absent. */
  capabilities?: DashboardCapability[];
  /** Session lifetime from now, 60-86400 seconds (default 3600). */
  ttlSeconds?: number;
}

/** Answer of the mint route: the one-time link and when the session it opens ends. */
export interface DashboardSessionLinkResource {
  /** `{PUBLIC_ADMIN_URL}/dashboard/#code=<one-time code>`: works once, within 10 minutes. */
  url: string;
  /** End of the session the link opens (mint time + ttlSeconds), whenever the link is opened. */
  expiresAt: string;
  /** The session's capabilities, `view` included, in canonical order. */
  capabilities: DashboardCapability[];
}

/** `POST /dashboard/api/session` body: the code of the link's fragment. */
export interface ExchangeDashboardCodeRequest {
  code: string;
}

/** What the page knows of its session (`POST`/`GET /dashboard/api/session`). */
export interface DashboardSessionResource {
  organization: string;
  world: string;
  worldName: string;
  capabilities: DashboardCapability[];
  expiresAt: string;
}

/** `POST .../endpoints/{id}/recover` body. */
export interface RecoverRequest {
  /** Start of the window (inclusive), on the deliveries' creation time. */
  since: string;
  /** End of the window (exclusive); now when absent. */
  until?: string;
  /** `true`: only count, queue nothing. */
  dryRun?: boolean;
}

/** Answer of a recover dry run. */
export interface RecoverPreviewResource {
  /** Failed deliveries of the endpoint created in the window. */
  count: number;
}

/** States of a recover job. */
export const RECOVERY_STATUSES = ["queued", "running", "done", "failed"] as const;
export type RecoveryStatus = (typeof RECOVERY_STATUSES)[number];

/** A recover job (`POST .../recover` 202 and `GET .../recoveries/{recoveryId}`). */
export interface RecoveryResource {
  id: string;
  endpointId: string;
  status: RecoveryStatus;
  /** Failed deliveries in the window when the recover was asked for. */
  total: number;
  /** Deliveries queued again so far. */
  requeued: number;
  since: string;
  /** The window's end, fixed when the recover was asked for. */
  until: string;
  /** Why the job failed (status `failed`), else null. */
  error: string | null;
  createdAt: string;
  updatedAt: string;
}

const CAPABILITY = { enum: [...DASHBOARD_CAPABILITIES] };

/** JSON Schema of {@link CreateDashboardSessionRequest}. */
export const CREATE_DASHBOARD_SESSION_REQUEST_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    capabilities: { type: "array", items: CAPABILITY, minItems: 1, uniqueItems: true },
    ttlSeconds: { type: "integer", minimum: MIN_DASHBOARD_SESSION_TTL_SECONDS, maximum: MAX_DASHBOARD_SESSION_TTL_SECONDS },
  },
} as const;

/** JSON Schema of {@link ExchangeDashboardCodeRequest}. */
export const EXCHANGE_DASHBOARD_CODE_REQUEST_SCHEMA = {
  type: "object",
  required: ["code"],
  additionalProperties: false,
  properties: { code: { type: "string", minLength: 1, maxLength: 200 } },
} as const;

/** JSON Schema of {@link RecoverRequest}. */
export const RECOVER_REQUEST_SCHEMA = {
  type: "object",
  required: ["since"],
  additionalProperties: false,
  properties: {
    since: { type: "string", format: "date-time" },
    until: { type: "string", format: "date-time" },
    dryRun: { type: "boolean" },
  },
} as const;

/** JSON Schema of {@link DashboardSessionResource}. */
export const DASHBOARD_SESSION_RESOURCE_SCHEMA = {
  type: "object",
  required: ["organization", "world", "worldName", "capabilities", "expiresAt"],
  properties: {
    organization: { type: "string" },
    world: { type: "string" },
    worldName: { type: "string" },
    capabilities: { type: "array", items: CAPABILITY },
    expiresAt: { type: "string", format: "date-time" },
  },
} as const;

/** JSON Schema of {@link DashboardSessionLinkResource}. */
export const DASHBOARD_SESSION_LINK_RESOURCE_SCHEMA = {
  type: "object",
  required: ["url", "expiresAt", "capabilities"],
  properties: {
    url: { type: "string", format: "uri" },
    expiresAt: { type: "string", format: "date-time" },
    capabilities: { type: "array", items: CAPABILITY },
  },
} as const;

/** JSON Schema of {@link RecoveryResource}. */
export const RECOVERY_RESOURCE_SCHEMA = {
  type: "object",
  required: ["id", "endpointId", "status", "total", "requeued", "since", "until", "error", "createdAt", "updatedAt"],
  properties: {
    id: { type: "string", format: "uuid" },
    endpointId: { type: "string", format: "uuid" },
    status: { enum: [...RECOVERY_STATUSES] },
    total: { type: "integer", minimum: 0 },
    requeued: { type: "integer", minimum: 0 },
    since: { type: "string", format: "date-time" },
    until: { type: "string", format: "date-time" },
    error: { type: ["string", "null"] },
    createdAt: { type: "string", format: "date-time" },
    updatedAt: { type: "string", format: "date-time" },
  },
} as const;

/** JSON Schema of {@link RecoverPreviewResource}. */
export const RECOVER_PREVIEW_RESOURCE_SCHEMA = {
  type: "object",
  required: ["count"],
  properties: { count: { type: "integer", minimum: 0 } },
} as const;

const createSessionSchema = compileValidator<CreateDashboardSessionRequest>(CREATE_DASHBOARD_SESSION_REQUEST_SCHEMA);
const recoverSchema = compileValidator<RecoverRequest>(RECOVER_REQUEST_SCHEMA);

/** Validates a mint body (`{}` when none was sent). */
export const validateCreateDashboardSessionRequest = (data: unknown): ValidationResult<CreateDashboardSessionRequest> => createSessionSchema(data);

/** Validates the page's code exchange body. */
export const validateExchangeDashboardCodeRequest: (data: unknown) => ValidationResult<ExchangeDashboardCodeRequest> =
  compileValidator<ExchangeDashboardCodeRequest>(EXCHANGE_DASHBOARD_CODE_REQUEST_SCHEMA);

/** Validates a recover body; besides the schema, `until` must be after `since`. */
export function validateRecoverRequest(data: unknown): ValidationResult<RecoverRequest> {
  const result = recoverSchema(data);
  if (!result.ok) return result;
  const { since, until } = result.value;
  if (until !== undefined && Date.parse(until) <= Date.parse(since)) {
    return { ok: false, errors: [{ pointer: "/until", detail: "must be after since" }] };
  }
  return result;
}

/** `capabilities` with `view` added and in the canonical order of {@link DASHBOARD_CAPABILITIES}. */
export function normalizeDashboardCapabilities(capabilities: readonly DashboardCapability[] | undefined): DashboardCapability[] {
  const given = new Set<DashboardCapability>(capabilities ?? DASHBOARD_CAPABILITIES);
  given.add("view");
  return DASHBOARD_CAPABILITIES.filter((c) => given.has(c));
}
