/**
 * The body of `POST /v1/events`: one event `{id, world, type, timestamp, data}` or
 * `{events: [...]}`. Validation reports every invalid member of every event at once, as JSON
 * pointers into the request (`/events/3/data/email`, or `/data/email` for the single form).
 */
import {
  EVENT_TYPES,
  INTAKE_EVENT_SHAPE_SCHEMA,
  WORLD_REFERENCE_PATTERN,
  compileValidator,
  escapePointerToken,
  validateEventData,
  type FieldError,
  type ValidationResult,
} from "@vw/contracts";

/** A type accepted at intake (the asynchronous domain events). */
export type IntakeEventType = (typeof EVENT_TYPES)[number];

/** Earliest and latest accepted `timestamp` (RFC 3339 needs a four-digit year after normalisation to UTC). */
export const MIN_EVENT_TIME = Date.UTC(1970, 0, 1);
export const MAX_EVENT_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** One validated event, ready to store. */
export interface IntakeEvent {
  /** The producer's id: the deduplication key within the world. */
  id: string;
  /** `<organization>/<world>` as sent, and its two slugs. */
  world: string;
  organizationSlug: string;
  worldSlug: string;
  type: IntakeEventType;
  /** The instant of `timestamp`, normalised to UTC with millisecond precision (`...T10:00:00.000Z`). */
  timestamp: string;
  data: Record<string, unknown>;
}

/** A validated request: its form and its events in request order. */
export interface IntakeRequest {
  form: "single" | "batch";
  events: IntakeEvent[];
}

/**
 * Types a receiver gets that are not submitted here, with where they come from instead.
 * A producer sending one of them is told which route takes it.
 */
const NOT_INTAKE_TYPES: Readonly<Record<string, string>> = {
  "member.connecting": "member.connecting is delivered synchronously while a member authenticates: call POST /v1/auth-hook instead",
  "analytics.batch": "analytics.batch is assembled by the service: send the inner analytics events to POST /v1/analytics instead",
  ping: "ping is sent only by the dashboard's Test action",
};

const WORLD_REF_RE = new RegExp(WORLD_REFERENCE_PATTERN);

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The member types of one event; the rules JSON Schema words badly are checked in {@link checkEvent}. */
const validateEventShape = compileValidator<{ id: string; world: string; type: string; timestamp: string; data: Record<string, unknown> }>(
  INTAKE_EVENT_SHAPE_SCHEMA,
);

/**
 * Validates a request body against the intake rules and the event catalogue. Nothing about the
 * database is checked here (unknown worlds are found when the events are stored).
 */
export function parseIntakeRequest(body: unknown, maxEvents: number): ValidationResult<IntakeRequest> {
  if (!isObject(body)) {
    return failure([{ pointer: "", detail: "must be a JSON object: one event {id, world, type, timestamp, data}, or {events: [...]}" }]);
  }
  if (!("events" in body)) {
    const checked = checkEvent(body, "");
    return checked.ok ? { ok: true, value: { form: "single", events: [checked.value] } } : checked;
  }

  const errors: FieldError[] = [];
  for (const key of Object.keys(body)) {
    if (key !== "events") errors.push({ pointer: `/${escapePointerToken(key)}`, detail: "is not allowed beside events" });
  }
  const items = body["events"];
  if (!Array.isArray(items)) {
    errors.push({ pointer: "/events", detail: "must be an array of events" });
    return failure(errors);
  }
  if (items.length === 0) errors.push({ pointer: "/events", detail: "must have at least 1 event" });
  if (items.length > maxEvents) errors.push({ pointer: "/events", detail: `must have at most ${maxEvents} events, got ${items.length}` });
  const events: IntakeEvent[] = [];
  items.forEach((item, index) => {
    const checked = checkEvent(item, `/events/${index}`);
    if (checked.ok) events.push(checked.value);
    else errors.push(...checked.errors);
  });
  return errors.length > 0 ? failure(errors) : { ok: true, value: { form: "batch", events } };
}

/** Every problem of one event, pointers prefixed with `prefix`. */
function checkEvent(item: unknown, prefix: string): ValidationResult<IntakeEvent> {
  const shape = validateEventShape(item);
  const errors = shape.ok ? [] : shape.errors.map((e) => ({ pointer: `${prefix}${e.pointer}`, detail: e.detail }));
  if (!isObject(item)) return failure(errors);
  const invalidAt = (member: string) => errors.some((e) => e.pointer === `${prefix}/${member}` || e.pointer.startsWith(`${prefix}/${member}/`));

  const { world, type, timestamp, data } = item;
  let slugs: RegExpExecArray | null = null;
  if (typeof world === "string") {
    slugs = WORLD_REF_RE.exec(world);
    if (!slugs) {
      errors.push({
        pointer: `${prefix}/world`,
        detail: 'must be "<organization>/<world>": two slugs of 1-63 lower-case letters, digits and inner hyphens',
      });
    }
  }

  let typeOk = false;
  if (typeof type === "string") {
    typeOk = (EVENT_TYPES as readonly string[]).includes(type);
    if (!typeOk) {
      const accepted = `accepted types: ${EVENT_TYPES.join(", ")}`;
      const why = NOT_INTAKE_TYPES[type];
      errors.push({ pointer: `${prefix}/type`, detail: why ? `is not accepted here: ${why}; ${accepted}` : `is not a known event type; ${accepted}` });
    }
  }

  let instant = Number.NaN;
  if (typeof timestamp === "string" && !invalidAt("timestamp")) {
    instant = Date.parse(timestamp);
    if (Number.isNaN(instant)) {
      // ajv-formats accepts a leap second (`23:59:60`), which a JavaScript Date cannot hold.
      errors.push({ pointer: `${prefix}/timestamp`, detail: "must be an RFC 3339 date-time without a leap second (use 23:59:59.999)" });
    } else if (instant < MIN_EVENT_TIME || instant > MAX_EVENT_TIME) {
      errors.push({ pointer: `${prefix}/timestamp`, detail: "must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z" });
    }
  }

  // The data schema of a type only means something once the type is known and data is an object.
  if (typeOk && isObject(data)) {
    const checked = validateEventData(type as IntakeEventType, data);
    if (!checked.ok) {
      for (const e of checked.errors) errors.push({ pointer: `${prefix}/data${e.pointer}`, detail: e.detail });
    }
  }

  if (errors.length > 0 || !shape.ok || !slugs) return failure(errors);
  return {
    ok: true,
    value: {
      id: shape.value.id,
      world: shape.value.world,
      organizationSlug: slugs[1] as string,
      worldSlug: slugs[2] as string,
      type: shape.value.type as IntakeEventType,
      timestamp: new Date(instant).toISOString(),
      data: shape.value.data,
    },
  };
}

function failure<T>(errors: FieldError[]): ValidationResult<T> {
  return { ok: false, errors };
}
