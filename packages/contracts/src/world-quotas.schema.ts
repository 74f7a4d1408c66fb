/**
 * A world's quotas (operator only): the type, the names and the JSON Schema shared by the world's
 * create and PATCH requests and its representation (admin.schema.ts); and its storage as the
 * representation shows it, against its storage quota.
 */

/** Default of MAX_STORAGE_BYTES_PER_WORLD: 10 GiB of files per world. */
export const DEFAULT_MAX_STORAGE_BYTES_PER_WORLD = 10 * 1024 ** 3;

/** Largest storage quota that can be set (1 PiB): within the integers JSON and JavaScript keep exactly. */
export const MAX_STORAGE_BYTES_CEILING = 1024 ** 5;

/**
 * A world's own quotas, set by the platform operator only (ADMIN_TOKEN). `null`: the platform
 * default (MAX_ENDPOINTS_PER_WORLD, MAX_AUTH_ENDPOINTS_PER_WORLD, ANALYTICS_BUFFER_MAX_PER_WORLD,
 * MAX_STORAGE_BYTES_PER_WORLD).
 */
export interface WorldQuotas {
  /** Webhook endpoints of the world, enabled or not. */
  maxEndpoints: number | null;
  /** Endpoints subscribed to `auth` (each is called while a member connects). */
  maxAuthEndpoints: number | null;
  /** Analytics events held in Redis for the world (all its endpoints' buffers); more are dropped and counted. */
  analyticsBufferMax: number | null;
  /** Bytes of files the world may store in map-storage; a write past it is refused (413 `quota-exceeded`). */
  maxStorageBytes: number | null;
}

/** A world's storage in map-storage, as its representation shows it (read only). */
export interface WorldStorage {
  /** Bytes the world's files take; null while map-storage has not counted them yet. */
  bytesInUse: number | null;
  /** The quota in effect: `quotas.maxStorageBytes`, or the platform default (MAX_STORAGE_BYTES_PER_WORLD). */
  maxBytes: number;
}

/** The world's quota names, as in {@link WorldQuotas}. */
export const WORLD_QUOTA_NAMES = ["maxEndpoints", "maxAuthEndpoints", "analyticsBufferMax", "maxStorageBytes"] as const;
export type WorldQuotaName = (typeof WORLD_QUOTA_NAMES)[number];

// ---- JSON Schema ---------------------------------------------------------------------------------

const quotaValueSchema = (description: string, maximum: number) =>
  ({ type: ["integer", "null"], minimum: 1, maximum, description: `${description} \`null\`: the platform default.` }) as const;

/** Schema of a world's quotas (operator only). In a PATCH each member given replaces the stored one. */
export const WORLD_QUOTAS_SCHEMA = {
  type: "object",
  additionalProperties: false,
  description: "Set by the platform operator (ADMIN_TOKEN) only; a dashboard session gets 403.",
  properties: {
    maxEndpoints: quotaValueSchema("Most webhook endpoints of the world (MAX_ENDPOINTS_PER_WORLD).", 100_000),
    maxAuthEndpoints: quotaValueSchema("Most endpoints subscribed to `auth` (MAX_AUTH_ENDPOINTS_PER_WORLD).", 1_000),
    analyticsBufferMax: quotaValueSchema("Most analytics events held in Redis for the world (ANALYTICS_BUFFER_MAX_PER_WORLD).", 10_000_000),
    maxStorageBytes: quotaValueSchema(
      "Most bytes of files the world stores in map-storage (MAX_STORAGE_BYTES_PER_WORLD); a PUT, PATCH or upload past it is refused with 413 `quota-exceeded`. Lowering it below what the world holds refuses every write that grows the world, and removes nothing.",
      MAX_STORAGE_BYTES_CEILING,
    ),
  },
} as const;

/** Schema of a world's {@link WorldStorage}. */
export const WORLD_STORAGE_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["bytesInUse", "maxBytes"],
  description: "The world's files in map-storage and the quota they count against (read only).",
  properties: {
    bytesInUse: {
      type: ["integer", "null"],
      minimum: 0,
      description:
        "Bytes the world's files take in S3, as map-storage counts them on every write and deletion (0 for a new world); null for a world created before the count existed, until map-storage has counted it (at its start-up, or the world's first write).",
    },
    maxBytes: { type: "integer", minimum: 1, description: "`quotas.maxStorageBytes`, or the platform default (MAX_STORAGE_BYTES_PER_WORLD) when that is null." },
  },
} as const;
