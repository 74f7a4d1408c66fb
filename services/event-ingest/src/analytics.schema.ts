/**
 * The body of `POST /v1/analytics`: `{world: "<org>/<world>", events: [inner events]}`. Each inner
 * event is checked with the contracts' analytics schema (unknown names and extra properties are
 * accepted; a tabulated property of a known name with the wrong type is refused); every problem
 * is reported at once as a JSON pointer into the request (`/events/3/data/properties/durationSeconds`).
 */
import { WORLD_REFERENCE_PATTERN, escapePointerToken, validateAnalyticsEvent, type AnalyticsEvent, type FieldError, type ValidationResult } from "@vw/contracts";

/** A validated analytics request. */
export interface AnalyticsIntakeRequest {
  /** `<organization>/<world>` as sent, and its two slugs. */
  world: string;
  organizationSlug: string;
  worldSlug: string;
  events: AnalyticsEvent[];
}

const WORLD_REF_RE = new RegExp(WORLD_REFERENCE_PATTERN);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Validates an analytics request; nothing about the database is checked here. */
export function parseAnalyticsRequest(body: unknown, maxEvents: number): ValidationResult<AnalyticsIntakeRequest> {
  if (!isObject(body)) return { ok: false, errors: [{ pointer: "", detail: 'must be a JSON object {world: "<organization>/<world>", events: [...]}' }] };
  const errors: FieldError[] = [];
  for (const key of Object.keys(body)) {
    if (key !== "world" && key !== "events") errors.push({ pointer: `/${escapePointerToken(key)}`, detail: "is not allowed beside world and events" });
  }
  const world = body["world"];
  const slugs = typeof world === "string" ? WORLD_REF_RE.exec(world) : null;
  if (!slugs) {
    errors.push({ pointer: "/world", detail: 'must be "<organization>/<world>": two slugs of 1-63 lower-case letters, digits and inner hyphens' });
  }
  const items = body["events"];
  const events: AnalyticsEvent[] = [];
  if (!Array.isArray(items)) {
    errors.push({ pointer: "/events", detail: "must be an array of inner analytics events" });
  } else {
    if (items.length === 0) errors.push({ pointer: "/events", detail: "must have at least 1 event" });
    if (items.length > maxEvents) errors.push({ pointer: "/events", detail: `must have at most ${maxEvents} events, got ${items.length}` });
    items.forEach((item, index) => {
      const checked = validateAnalyticsEvent(item);
      if (checked.ok) events.push(checked.value);
      else for (const e of checked.errors) errors.push({ pointer: `/events/${index}${e.pointer}`, detail: e.detail });
    });
  }
  if (errors.length > 0 || !slugs) return { ok: false, errors };
  return { ok: true, value: { world: world as string, organizationSlug: slugs[1] as string, worldSlug: slugs[2] as string, events } };
}
