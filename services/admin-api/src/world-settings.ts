import {
  ANALYTICS_CATEGORIES,
  DEFAULT_WORLD_ANALYTICS,
  IDENTITY_PROVIDER_KINDS,
  type IdentityProvider,
  type IdentityProviderInput,
  type WorldAnalytics,
  type WorldAnalyticsPatch,
} from "@vw/contracts";

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const bool = (v: unknown, fallback: boolean) => (typeof v === "boolean" ? v : fallback);

/**
 * The analytics settings stored in a world's JSON column, completed with the defaults: a setting
 * added after the row was written reads as its default instead of going missing.
 */
export function readAnalytics(stored: unknown): WorldAnalytics {
  const s = isObject(stored) ? stored : {};
  const categories = isObject(s["categories"]) ? s["categories"] : {};
  return {
    enabled: bool(s["enabled"], DEFAULT_WORLD_ANALYTICS.enabled),
    userLevelActivity: bool(s["userLevelActivity"], DEFAULT_WORLD_ANALYTICS.userLevelActivity),
    categories: Object.fromEntries(
      ANALYTICS_CATEGORIES.map((c) => [c, bool(categories[c], DEFAULT_WORLD_ANALYTICS.categories[c])]),
    ) as WorldAnalytics["categories"],
  };
}

/** `patch` merged into `current` member by member (categories one by one); absent members are kept. */
export function mergeAnalytics(current: WorldAnalytics, patch: WorldAnalyticsPatch | undefined): WorldAnalytics {
  if (!patch) return current;
  return {
    enabled: patch.enabled ?? current.enabled,
    userLevelActivity: patch.userLevelActivity ?? current.userLevelActivity,
    categories: { ...current.categories, ...stripUndefined(patch.categories ?? {}) },
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Identity providers as stored: `exposeAccessToken` made explicit. */
export function normalizeIdentityProviders(input: IdentityProviderInput[]): IdentityProvider[] {
  return input.map((p) => ({ id: p.id, kind: p.kind, exposeAccessToken: p.exposeAccessToken ?? false }));
}

/** The identity providers stored in a world's JSON column; malformed entries are left out. */
export function readIdentityProviders(stored: unknown): IdentityProvider[] {
  if (!Array.isArray(stored)) return [];
  return stored.flatMap((p): IdentityProvider[] =>
    isObject(p) && typeof p["id"] === "string" && (IDENTITY_PROVIDER_KINDS as readonly unknown[]).includes(p["kind"])
      ? [{ id: p["id"], kind: p["kind"] as IdentityProvider["kind"], exposeAccessToken: p["exposeAccessToken"] === true }]
      : [],
  );
}
