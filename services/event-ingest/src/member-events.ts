/**
 * How accepted domain events feed the member directory (@vw/db MemberDirectory): which events
 * carry a person, the extra rules their data must meet to be stored, and the directory's view of
 * them. Personal data in here is never logged.
 */
import { memberUuidProblem, type MemberEvent } from "@vw/db";
import type { ConsentChangedData, FieldError, VisitorRegisteredData } from "@vw/contracts";

/** Types whose data updates the member directory. */
const MEMBER_EVENT_TYPES: ReadonlySet<string> = new Set(["visitor.registered", "consent.changed"]);

/**
 * What the directory needs of a catalogue-valid `data` beyond its schema, as pointers relative to
 * `data`: a `uuid` it can key on, and text PostgreSQL can store (no U+0000). Refused at intake,
 * so a stored event always reaches the directory.
 */
export function memberDataProblems(type: string, data: Record<string, unknown>): FieldError[] {
  if (!MEMBER_EVENT_TYPES.has(type)) return [];
  const errors: FieldError[] = [];
  if (typeof data["uuid"] === "string") {
    const problem = memberUuidProblem(data["uuid"]);
    if (problem !== null) errors.push({ pointer: "/uuid", detail: problem });
  }
  for (const field of ["name", "email"]) {
    const value = data[field];
    if (typeof value === "string" && value.includes("\u0000")) errors.push({ pointer: `/${field}`, detail: "must not contain U+0000" });
  }
  return errors;
}

/** What {@link toMemberEvent} reads of an accepted event (an `IntakeEvent` of events.schema.ts). */
export interface AcceptedEvent {
  id: string;
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/** The directory's view of an accepted event of world `worldId`, or null when it names no person. */
export function toMemberEvent(event: AcceptedEvent, worldId: string): MemberEvent | null {
  const base = { worldId, eventId: event.id, timestamp: event.timestamp };
  if (event.type === "visitor.registered") {
    const data = event.data as unknown as VisitorRegisteredData;
    return { kind: "visitor-registered", ...base, uuid: data.uuid, name: data.name, email: data.email };
  }
  if (event.type === "consent.changed") {
    const data = event.data as unknown as ConsentChangedData;
    return { kind: "consent-changed", ...base, uuid: data.uuid, email: data.email, type: data.type, purpose: data.purpose, granted: data.granted };
  }
  return null;
}
