/**
 * A world's quotas (operator only): the type, the names and the JSON Schema shared by the world's
 * create and PATCH requests and its representation (admin.schema.ts).
 */

/**
 * A world's own quotas, set by the platform operator only (ADMIN_TOKEN). `null`: the platform
 * default (MAX_ENDPOINTS_PER_WORLD, MAX_AUTH_ENDPOINTS_PER_WORLD, ANALYTICS_BUFFER_MAX_PER_WORLD).
 */
export interface WorldQuotas {
  /** Webhook endpoints of the world, enabled or not. */
  maxEndpoints: number | null;
  /** Endpoints subscribed to `auth` (each is called while a member connects). */
  maxAuthEndpoints: number | null;
  /** Analytics events held in Redis for the world (all its endpoints' buffers); more are dropped and counted. */
  analyticsBufferMax: number | null;
}

/** The world's quota names, as in {@link WorldQuotas}. */
export const WORLD_QUOTA_NAMES = ["maxEndpoints", "maxAuthEndpoints", "analyticsBufferMax"] as const;
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
  },
} as const;
