/**
 * The privacy rules of analytics, applied at ingestion (spec: analytics.batch, Privacy rules):
 * a world that disabled analytics sends nothing; a category switched off drops its families; a
 * world that opted out of user-level activity gets a pseudonymous `user.uuid` and loses the
 * properties of USER_LEVEL_STRIPPED_PROPERTIES (`fileName`).
 */
import { createHmac, hkdfSync } from "node:crypto";
import {
  ANALYTICS_CATEGORIES,
  DEFAULT_WORLD_ANALYTICS,
  USER_LEVEL_STRIPPED_PROPERTIES,
  analyticsCategoryOf,
  type AnalyticsEvent,
  type WorldAnalytics,
} from "@vw/contracts";

/** Length of a pseudonym: 22 base64url characters carry 132 bits of the HMAC. */
export const PSEUDONYM_LENGTH = 22;

/**
 * The stable pseudonym of a member in a world: base64url(HMAC-SHA256(key, worldId ":" uuid)),
 * truncated. The same member in the same world always gets the same one (receivers can count
 * sessions per person); two worlds get unrelated ones, and without the key nobody can go back to
 * the member id.
 */
export function pseudonymOf(key: Buffer, worldId: string, uuid: string): string {
  return createHmac("sha256", key).update(`${worldId}:${uuid}`).digest("base64url").slice(0, PSEUDONYM_LENGTH);
}

/**
 * The pseudonym key: ANALYTICS_PSEUDONYM_KEY when set, else one derived (HKDF-SHA256) from
 * SECRETS_ENCRYPTION_KEY, so a deployment works without a new secret. Changing the key (or, for
 * the derived one, adding a key to SECRETS_ENCRYPTION_KEY) changes every pseudonym: set
 * ANALYTICS_PSEUDONYM_KEY to keep them across secret-box key rotations.
 */
export function pseudonymKey(configured: string | null, fallbackSecret: string): Buffer {
  if (configured !== null) return Buffer.from(configured, "utf8");
  return Buffer.from(hkdfSync("sha256", fallbackSecret, "vw-analytics", "analytics pseudonym key v1", 32));
}

/**
 * A world's settings as stored (JSON validated by admin-api): a missing member reads as the
 * default of a new world (on); a member present but not a boolean reads as false, the private
 * choice, so a damaged setting never leaks events or member ids.
 */
export function readWorldAnalytics(stored: unknown): WorldAnalytics {
  const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
  const s = obj(stored);
  const c = obj(s["categories"]);
  const categories = { ...DEFAULT_WORLD_ANALYTICS.categories };
  for (const category of ANALYTICS_CATEGORIES) categories[category] = c[category] === undefined ? true : c[category] === true;
  return {
    enabled: s["enabled"] === undefined ? true : s["enabled"] === true,
    userLevelActivity: s["userLevelActivity"] === undefined ? true : s["userLevelActivity"] === true,
    categories,
  };
}

/**
 * The event as the world's receivers may see it, or null when the world's settings drop it.
 * Never mutates `event`.
 */
export function applyPrivacy(settings: WorldAnalytics, key: Buffer, worldId: string, event: AnalyticsEvent): AnalyticsEvent | null {
  if (!settings.enabled) return null;
  const category = analyticsCategoryOf(event.data.eventName);
  if (category === null || !settings.categories[category]) return null;
  if (settings.userLevelActivity) return event;
  const properties: Record<string, unknown> = { ...event.data.properties };
  for (const name of USER_LEVEL_STRIPPED_PROPERTIES) delete properties[name];
  return {
    ...event,
    data: {
      ...event.data,
      user: { ...event.data.user, uuid: pseudonymOf(key, worldId, event.data.user.uuid) },
      properties,
    },
  } as AnalyticsEvent;
}
