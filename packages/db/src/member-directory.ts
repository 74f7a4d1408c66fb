/**
 * The member directory of the Inbound API: per world, each person's `uuid`, name, email, kind
 * (`member` or `visitor`) and latest consent decision per purpose. This module is the only writer
 * of `members`, `member_consents` and `member_deletions`: event-ingest writes through it (events
 * and the platform's member intake), admin-api reads through it.
 *
 * Ordering: deliveries and producer retries are not ordered, so every value keeps the time of the
 * data it came from and a write only replaces it with newer data, in the statement that writes it
 * (`ON CONFLICT ... DO UPDATE ... WHERE`), which PostgreSQL evaluates on the row's latest committed
 * version while holding its lock: concurrent intakes cannot interleave into an older result.
 * Consent decisions order on (event `timestamp`, event id), so two decisions of the same
 * millisecond end the same whatever their arrival order. A deletion leaves a marker (no personal
 * data) so that an event not newer than the deletion never brings the person back.
 */
import type { SqlRunner, Statement } from "./delivery-log/sql-runner.js";

/** Kinds of person in the directory. */
export const MEMBER_TYPES = ["member", "visitor"] as const;
export type MemberType = (typeof MEMBER_TYPES)[number];

/** Longest `uuid` the directory keeps (it is part of a B-tree key, so it must stay small). */
export const MEMBER_UUID_MAX_LENGTH = 200;

/** Why `value` cannot be a member uuid, or null when it can. */
export function memberUuidProblem(value: string): string | null {
  if (value.length === 0) return "must not be empty";
  if (value.length > MEMBER_UUID_MAX_LENGTH) return `must be at most ${MEMBER_UUID_MAX_LENGTH} characters long`;
  if (value.includes("\u0000")) return "must not contain U+0000";
  return null;
}

/** One consent answer as the Inbound API shows it. */
export interface ConsentAnswer {
  /** true: given; false: refused or withdrawn; null: taken off the record. */
  granted: boolean | null;
  /** `timestamp` of the `consent.changed` event that recorded it (ISO 8601, UTC, milliseconds). */
  decidedAt: string;
}

/** The member record of the Inbound API. Purposes never decided are absent from `consents`. */
export interface MemberRecord {
  uuid: string;
  /** Null while only consent decisions are known (they carry no name). */
  name: string | null;
  email: string;
  type: MemberType;
  consents: Record<string, ConsentAnswer>;
}

/** What the platform's member intake sets: the whole profile. */
export interface MemberProfile {
  name: string;
  email: string;
  type: MemberType;
}

/** What an accepted domain event tells the directory. `timestamp` is ISO 8601; `eventId` the producer's id. */
export type MemberEvent =
  | { kind: "visitor-registered"; worldId: string; eventId: string; timestamp: string; uuid: string; name: string; email: string }
  | {
      kind: "consent-changed";
      worldId: string;
      eventId: string;
      timestamp: string;
      uuid: string;
      email: string;
      type: MemberType;
      purpose: string;
      granted: boolean | null;
    };

const ISO_MS = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

const FIND_SQL: Statement = { name: "vw_members_find", text: `
  SELECT m.uuid, m.name, m.email, m.type, c.purpose, c.granted,
         to_char(c.decided_at AT TIME ZONE 'UTC', ${ISO_MS}) AS decided_at
  FROM members m
  LEFT JOIN member_consents c ON c.world_id = m.world_id AND c.member_uuid = m.uuid
  WHERE m.world_id = $1::uuid AND m.uuid = $2
  ORDER BY c.purpose` };

// The platform's intake is authoritative: it replaces the profile, and its time (now) orders it
// against events still in flight.
const UPSERT_SQL: Statement = { name: "vw_members_upsert", text: `
  WITH up AS (
    INSERT INTO members (world_id, uuid, name, name_at, email, type, profile_at)
    VALUES ($1::uuid, $2, $3, now(), $4, $5, now())
    ON CONFLICT (world_id, uuid) DO UPDATE SET
      name = EXCLUDED.name, email = EXCLUDED.email, type = EXCLUDED.type,
      name_at = GREATEST(members.name_at, EXCLUDED.name_at),
      profile_at = GREATEST(members.profile_at, EXCLUDED.profile_at),
      updated_at = now()
    RETURNING uuid, name, email, type, (xmax = 0) AS created
  )
  SELECT up.uuid, up.name, up.email, up.type, up.created, c.purpose, c.granted,
         to_char(c.decided_at AT TIME ZONE 'UTC', ${ISO_MS}) AS decided_at
  FROM up
  LEFT JOIN member_consents c ON c.world_id = $1::uuid AND c.member_uuid = up.uuid
  ORDER BY c.purpose` };

// The marker is written only when a member was deleted: a 404 changes nothing.
const DELETE_SQL: Statement = { name: "vw_members_delete", text: `
  WITH gone AS (DELETE FROM members WHERE world_id = $1::uuid AND uuid = $2 RETURNING uuid),
  marked AS (
    INSERT INTO member_deletions (world_id, uuid, deleted_at)
    SELECT $1::uuid, $2, now() WHERE EXISTS (SELECT 1 FROM gone)
    ON CONFLICT (world_id, uuid) DO UPDATE SET deleted_at = GREATEST(member_deletions.deleted_at, EXCLUDED.deleted_at)
  )
  SELECT count(*)::int AS deleted FROM gone` };

// One statement, one round trip: the people first (one row each, folded beforehand: ON CONFLICT
// may touch a row once per statement), then their decisions. Rows go in key order so concurrent
// batches lock them in the same order.
// People: each field moves only forward in time; data not newer than a deletion is dropped.
// Decisions: the spec's ordering rule, a stored decision is replaced only by a strictly newer one.
// A decision joins the person row this statement wrote (inserted, or updated and so locked until
// commit), so a concurrent deletion cannot slip between them; none for a person deleted since.
const APPLY_EVENTS_SQL: Statement = { name: "vw_members_apply_events", text: `
  WITH people AS (
    INSERT INTO members (world_id, uuid, name, name_at, email, type, profile_at)
    SELECT v.world_id, v.uuid,
           CASE WHEN d.deleted_at IS NULL OR v.name_at > d.deleted_at THEN v.name END,
           CASE WHEN d.deleted_at IS NULL OR v.name_at > d.deleted_at THEN v.name_at END,
           v.email, v.type, v.profile_at
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::timestamptz[])
         AS v(world_id, uuid, name, name_at, email, type, profile_at)
    LEFT JOIN member_deletions d ON d.world_id = v.world_id AND d.uuid = v.uuid
    WHERE d.deleted_at IS NULL OR v.profile_at > d.deleted_at
    ORDER BY v.world_id, v.uuid
    ON CONFLICT (world_id, uuid) DO UPDATE SET
      email = CASE WHEN EXCLUDED.profile_at >= members.profile_at THEN EXCLUDED.email ELSE members.email END,
      type = CASE WHEN EXCLUDED.profile_at >= members.profile_at THEN EXCLUDED.type ELSE members.type END,
      profile_at = GREATEST(members.profile_at, EXCLUDED.profile_at),
      name = CASE WHEN EXCLUDED.name_at IS NOT NULL AND (members.name_at IS NULL OR EXCLUDED.name_at >= members.name_at)
                  THEN EXCLUDED.name ELSE members.name END,
      name_at = GREATEST(members.name_at, EXCLUDED.name_at),
      updated_at = now()
    RETURNING world_id, uuid
  )
  INSERT INTO member_consents (world_id, member_uuid, purpose, granted, decided_at, decided_by)
  SELECT v.world_id, v.member_uuid, v.purpose, v.granted, v.decided_at, v.decided_by
  FROM unnest($8::uuid[], $9::text[], $10::text[], $11::boolean[], $12::timestamptz[], $13::text[])
       AS v(world_id, member_uuid, purpose, granted, decided_at, decided_by)
  JOIN people p ON p.world_id = v.world_id AND p.uuid = v.member_uuid
  WHERE NOT EXISTS (SELECT 1 FROM member_deletions d
                    WHERE d.world_id = v.world_id AND d.uuid = v.member_uuid AND d.deleted_at >= v.decided_at)
  ORDER BY v.world_id, v.member_uuid, v.purpose
  ON CONFLICT (world_id, member_uuid, purpose) DO UPDATE SET
    granted = EXCLUDED.granted, decided_at = EXCLUDED.decided_at, decided_by = EXCLUDED.decided_by
  WHERE (member_consents.decided_at, member_consents.decided_by) < (EXCLUDED.decided_at, EXCLUDED.decided_by)` };

interface RecordRow {
  uuid: string;
  name: string | null;
  email: string;
  type: MemberType;
  purpose: string | null;
  granted: boolean | null;
  decided_at: string | null;
  created?: boolean;
}

interface ProfileRow {
  worldId: string;
  uuid: string;
  name: string | null;
  nameAt: string | null;
  nameKey: Stamp | null;
  email: string;
  type: MemberType;
  profileAt: string;
  profileKey: Stamp;
}

interface ConsentRow {
  worldId: string;
  uuid: string;
  purpose: string;
  granted: boolean | null;
  decidedAt: string;
  decidedBy: string;
  key: Stamp;
}

/** (time in ms, event id): the order of data from events. */
type Stamp = readonly [number, string];
const newer = (a: Stamp, b: Stamp) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
const byKey = <T>(map: Map<string, T>) => [...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);

/**
 * The error of a failed statement without its text: PostgreSQL quotes row values (names, emails)
 * in messages and details, and errors are logged. Keeps `code` and `name`, which is what callers
 * classify on (a database that is down is a 503), and connectivity messages, which quote no row.
 */
export function withoutRowData(err: unknown): Error {
  const e = (typeof err === "object" && err !== null ? err : {}) as { code?: unknown; name?: unknown; message?: unknown };
  const code = typeof e.code === "string" ? e.code : undefined;
  const connectivity = typeof e.message === "string" && /Can't reach database server|Connection terminated|Connection is closed|timeout/i.test(e.message) && !/row|Key \(/.test(e.message);
  const safe = new Error(connectivity ? (e.message as string) : `member directory statement failed${code ? ` (${code})` : ""}`);
  if (typeof e.name === "string") safe.name = e.name;
  return Object.assign(safe, code ? { code } : {});
}

/** Runs one statement; its failure loses the row data (see {@link withoutRowData}). */
async function run<T>(sql: SqlRunner, statement: Statement, values: readonly unknown[]): Promise<T[]> {
  try {
    return await sql.query<T>(statement, values);
  } catch (err) {
    throw withoutRowData(err);
  }
}

/** Reads and writes the member directory; see the file comment for the ordering rules. */
export class MemberDirectory {
  /**
   * @param sql where reads and the intake's writes run (the delivery log's runner: `pgRunner` for
   * prepared statements, `prismaRunner`); events are written in the caller's transaction.
   */
  constructor(private readonly sql: SqlRunner) {}

  /** The record of `uuid` in the world, or null when the world has no such member. */
  async find(worldId: string, uuid: string): Promise<MemberRecord | null> {
    return toRecord(await run<RecordRow>(this.sql, FIND_SQL, [worldId, uuid]));
  }

  /** Creates or replaces the profile of `uuid` (consents are kept); `created` tells which. */
  async upsert(worldId: string, uuid: string, profile: MemberProfile): Promise<{ created: boolean; record: MemberRecord }> {
    const rows = await run<RecordRow>(this.sql, UPSERT_SQL, [worldId, uuid, profile.name, profile.email, profile.type]);
    const record = toRecord(rows) as MemberRecord;
    return { created: rows[0]?.created === true, record };
  }

  /** Deletes `uuid` and its consents; false when the world had no such member. */
  async remove(worldId: string, uuid: string): Promise<boolean> {
    const [row] = await run<{ deleted: number }>(this.sql, DELETE_SQL, [worldId, uuid]);
    return (row?.deleted ?? 0) > 0;
  }

  /**
   * Applies accepted events: `visitor.registered` creates or updates a visitor, `consent.changed`
   * creates the person when unknown (with its email and type, no name) and records the decision
   * unless a newer one is stored. One statement, run on `tx` (the caller's transaction,
   * so the directory changes exactly when the events are stored).
   */
  async applyEvents(events: readonly MemberEvent[], tx: SqlRunner = this.sql): Promise<void> {
    if (events.length === 0) return;
    const profiles = new Map<string, ProfileRow>();
    const consents = new Map<string, ConsentRow>();
    for (const event of events) {
      const key: Stamp = [Date.parse(event.timestamp), event.eventId];
      const memberKey = `${event.worldId}\u0000${event.uuid}`;
      const name = event.kind === "visitor-registered" ? event.name : null;
      const type: MemberType = event.kind === "visitor-registered" ? "visitor" : event.type;
      const seen = profiles.get(memberKey);
      const next: ProfileRow = seen ?? {
        worldId: event.worldId,
        uuid: event.uuid,
        name: null,
        nameAt: null,
        nameKey: null,
        email: event.email,
        type,
        profileAt: event.timestamp,
        profileKey: key,
      };
      if (seen && newer(key, seen.profileKey)) Object.assign(next, { email: event.email, type, profileAt: event.timestamp, profileKey: key });
      if (name !== null && (next.nameKey === null || newer(key, next.nameKey))) Object.assign(next, { name, nameAt: event.timestamp, nameKey: key });
      profiles.set(memberKey, next);

      if (event.kind === "consent-changed") {
        const consentKey = `${memberKey}\u0000${event.purpose}`;
        const stored = consents.get(consentKey);
        if (!stored || newer(key, stored.key)) {
          consents.set(consentKey, {
            worldId: event.worldId,
            uuid: event.uuid,
            purpose: event.purpose,
            granted: event.granted,
            decidedAt: event.timestamp,
            decidedBy: event.eventId,
            key,
          });
        }
      }
    }
    const p = byKey(profiles);
    const c = byKey(consents);
    await run(tx, APPLY_EVENTS_SQL, [
      p.map((r) => r.worldId),
      p.map((r) => r.uuid),
      p.map((r) => r.name),
      p.map((r) => r.nameAt),
      p.map((r) => r.email),
      p.map((r) => r.type),
      p.map((r) => r.profileAt),
      c.map((r) => r.worldId),
      c.map((r) => r.uuid),
      c.map((r) => r.purpose),
      c.map((r) => r.granted),
      c.map((r) => r.decidedAt),
      c.map((r) => r.decidedBy),
    ]);
  }
}

/** Folds the rows of one member (one per consent, or one with null consent columns) into its record. */
function toRecord(rows: readonly RecordRow[]): MemberRecord | null {
  const first = rows[0];
  if (!first) return null;
  const consents: Record<string, ConsentAnswer> = {};
  for (const row of rows) {
    if (row.purpose !== null && row.decided_at !== null) consents[row.purpose] = { granted: row.granted, decidedAt: row.decided_at };
  }
  return { uuid: first.uuid, name: first.name, email: first.email, type: first.type, consents };
}
