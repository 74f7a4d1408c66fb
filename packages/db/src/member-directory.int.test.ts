/**
 * MemberDirectory against the real PostgreSQL: the ordering rule holds whatever the arrival order
 * and with concurrent intakes (each event in its own transaction on its own connection, as
 * concurrent event-ingest requests or replicas write), and failures never carry row data.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { MemberDirectory, createPgPool, createPrismaClient, pgRunner, prismaRunner, withoutRowData, type MemberEvent, type PgPool, type PrismaClient } from "./index.js";

let prisma: PrismaClient;
let pool: PgPool;
let directory: MemberDirectory;
let worldId: string;
const prefix = `mdt${randomBytes(3).toString("hex")}-`;

beforeAll(async () => {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error("DATABASE_URL is not set: run through jest (test/global-setup.js)");
  prisma = createPrismaClient(url, { max: 8 });
  pool = createPgPool(url, { max: 2 });
  directory = new MemberDirectory(pgRunner(pool));
  const org = await prisma.organization.create({ data: { slug: `${prefix}org`, name: "Org" } });
  worldId = (await prisma.world.create({ data: { organizationId: org.id, slug: "w", name: "W", adminEmails: [] } })).id;
});
afterAll(async () => {
  await prisma.organization.deleteMany({ where: { slug: { startsWith: prefix } } });
  await Promise.all([prisma.$disconnect(), pool.end()]);
});

const iso = (ms: number) => new Date(ms).toISOString();
const consent = (uuid: string, timestamp: string, granted: boolean | null, eventId: string = randomUUID()): MemberEvent => ({
  kind: "consent-changed",
  worldId,
  eventId,
  timestamp,
  uuid,
  email: `${eventId}@example.com`,
  type: "visitor",
  purpose: "newsletter",
  granted,
});

/**
 * Each event in its own interactive transaction, all started at once (as concurrent ingest
 * requests); they queue for the 8 connections, so waiting for one is bounded generously (a busy
 * machine), like event-ingest's own transactions.
 */
const concurrently = (events: MemberEvent[]) =>
  Promise.all(events.map((event) => prisma.$transaction((tx) => directory.applyEvents([event], prismaRunner(tx)), { maxWait: 60_000, timeout: 60_000 })));

function shuffled<T>(items: T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

describe("MemberDirectory ordering", () => {
  it("keeps the newest decision and the newest email whatever the order of 40 concurrent intakes", async () => {
    const uuid = randomUUID();
    const base = Date.UTC(2026, 0, 1);
    const events = Array.from({ length: 40 }, (_, i) => consent(uuid, iso(base + i * 1000), i % 3 === 0 ? null : i % 2 === 0));
    await concurrently(shuffled(events));
    const newest = events[39] as Extract<MemberEvent, { kind: "consent-changed" }>;
    expect(await directory.find(worldId, uuid)).toEqual({
      uuid,
      name: null,
      email: newest.email,
      type: "visitor",
      consents: { newsletter: { granted: newest.granted, decidedAt: newest.timestamp } },
    });
  });

  it("breaks a tie between decisions of the same millisecond on the event id, in any order", async () => {
    const at = iso(Date.UTC(2026, 0, 2));
    for (const order of [[0, 1], [1, 0]]) {
      const uuid = randomUUID();
      const pair = [consent(uuid, at, true, "event-a"), consent(uuid, at, false, "event-b")];
      for (const i of order) await directory.applyEvents([pair[i] as MemberEvent]);
      expect((await directory.find(worldId, uuid))?.consents["newsletter"]).toEqual({ granted: false, decidedAt: at });
    }
  });

  it("folds several events about one person in one batch (newest name, newest decision per purpose)", async () => {
    const uuid = randomUUID();
    const t = (s: number) => iso(Date.UTC(2026, 0, 3, 0, 0, s));
    const newest = consent(uuid, t(3), true);
    await directory.applyEvents([
      { kind: "visitor-registered", worldId, eventId: "r2", timestamp: t(2), uuid, name: "Newer Name", email: "newer@example.com" },
      newest,
      { kind: "visitor-registered", worldId, eventId: "r1", timestamp: t(1), uuid, name: "Older Name", email: "older@example.com" },
      consent(uuid, t(0), false),
    ]);
    const record = await directory.find(worldId, uuid);
    // The name comes from the newest registration, the email from the newest event of all.
    expect(record).toEqual({ uuid, name: "Newer Name", email: (newest as { email: string }).email, type: "visitor", consents: { newsletter: { granted: true, decidedAt: t(3) } } });
    // An older registration arriving later changes nothing.
    await directory.applyEvents([{ kind: "visitor-registered", worldId, eventId: "r0", timestamp: t(0), uuid, name: "Oldest", email: "oldest@example.com" }]);
    expect(await directory.find(worldId, uuid)).toEqual(record);
  });

  it("keeps deleted people deleted against late events, and lets newer ones recreate them", async () => {
    const uuid = randomUUID();
    const before = iso(Date.now() - 60_000);
    expect((await directory.upsert(worldId, uuid, { name: "N", email: "n@example.com", type: "member" })).created).toBe(true);
    expect(await directory.remove(worldId, uuid)).toBe(true);
    expect(await directory.remove(worldId, uuid)).toBe(false);
    await concurrently([consent(uuid, before, true), { kind: "visitor-registered", worldId, eventId: "late", timestamp: before, uuid, name: "Late", email: "late@example.com" }]);
    expect(await directory.find(worldId, uuid)).toBeNull();
    await directory.applyEvents([consent(uuid, iso(Date.now() + 60_000), false)]);
    expect((await directory.find(worldId, uuid))?.consents["newsletter"]?.granted).toBe(false);
  });
});

describe("withoutRowData", () => {
  it("drops the row values PostgreSQL quotes in a failed statement's message, keeping code and name", async () => {
    let caught: unknown;
    try {
      await pool.query("INSERT INTO members (world_id, uuid, email, type, profile_at) VALUES ($1, $2, NULL, 'secret@example.com', now())", [worldId, randomUUID()]);
    } catch (err) {
      caught = err;
    }
    expect(String((caught as { detail?: string }).detail)).toContain("secret@example.com");
    const safe = withoutRowData(caught);
    expect(`${safe.message} ${JSON.stringify(safe)}`).not.toContain("secret@example.com");
    expect((safe as Error & { code?: string }).code).toBe("23502");
  });
});
