/**
 * The Inbound API's member record end to end: the platform sends events and member
 * intakes to a real event-ingest process, and a receiver looks the person up on admin-api with
 * the world's API key, as a customer's code would. Real PostgreSQL and Redis throughout.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { spawnService, type ServiceProcess } from "@vw/testing";
import { generateSecretBoxKey } from "@vw/webhook-core";
import { startAdminApi, type AdminApiHarness } from "./harness.js";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const INGEST_TOKEN = `members-ingest-${randomBytes(12).toString("hex")}`;

let h: AdminApiHarness;
let clock = Date.now();
let ingest: ServiceProcess;

interface World {
  org: string;
  world: string;
  ref: string;
  key: string;
}

async function createWorld(): Promise<World> {
  const org = h.slug("org");
  const world = h.slug("w");
  expect((await h.request("POST", "/admin/v1/organizations", { body: { slug: org, name: "Org" } })).status).toBe(201);
  const created = await h.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug: world, name: "World", adminEmails: ["ops@example.com"] } });
  expect(created.status).toBe(201);
  const key = await h.request("POST", `/admin/v1/worlds/${org}/${world}/api-keys`, { body: {} });
  expect(key.status).toBe(201);
  return { org, world, ref: `${org}/${world}`, key: key.body.token as string };
}

/** What the platform does: POST /v1/events on event-ingest. */
async function sendEvents(events: unknown[]): Promise<void> {
  const res = await fetch(`${ingest.url}/v1/events`, {
    method: "POST",
    headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ events }),
  });
  expect(res.status).toBe(202);
}

async function intake(method: "PUT" | "DELETE", w: World, uuid: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${ingest.url}/v1/worlds/${w.org}/${w.world}/members/${encodeURIComponent(uuid)}`, {
    method,
    headers: { authorization: `Bearer ${INGEST_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : JSON.parse(text), headers: res.headers };
}

/** What a receiver does: GET the member record with the world's API key. */
const lookup = (worldSlug: string, uuid: string, key: string | null) =>
  h.request("GET", `/api/v1/worlds/${worldSlug}/members/${encodeURIComponent(uuid)}`, { token: key });

const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();
const visitorRegistered = (w: World, uuid: string, name: string, email: string, timestamp: string) => ({
  id: randomUUID(),
  world: w.ref,
  type: "visitor.registered",
  timestamp,
  data: { uuid, name, email, via: "sso" },
});
const consentChanged = (w: World, uuid: string, purpose: string, granted: boolean | null, timestamp: string, email = "ada@example.com") => ({
  id: randomUUID(),
  world: w.ref,
  type: "consent.changed",
  timestamp,
  data: { uuid, email, type: "visitor", purpose, granted },
});

let a: World;
let b: World;

beforeAll(async () => {
  h = await startAdminApi({ now: () => new Date(clock) });
  ingest = await spawnService(join(servicesDir, "event-ingest"), {
    DATABASE_URL: process.env.DATABASE_URL as string,
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    REDIS_KEY_PREFIX: h.redisKeyPrefix,
    INGEST_TOKEN,
    SECRETS_ENCRYPTION_KEY: generateSecretBoxKey(),
    // Every request line is logged, so the assertion on personal data below sees them all.
    LOG_LEVEL: "debug",
  });
  [a, b] = await Promise.all([createWorld(), createWorld()]);
}, 60_000);

afterAll(async () => {
  await ingest?.stop();
  await h?.close();
});

describe("kept current from events", () => {
  it("stores the newer of two consent decisions sent newest first, and reads a null decision back as null", async () => {
    const uuid = randomUUID();
    const older = at(-60_000);
    const newer = at(-30_000);
    await sendEvents([visitorRegistered(a, uuid, "Ada Lovelace", "ada@example.com", at(-120_000))]);
    await sendEvents([consentChanged(a, uuid, "newsletter", false, newer)]);
    await sendEvents([consentChanged(a, uuid, "newsletter", true, older)]);
    await sendEvents([consentChanged(a, uuid, "events", null, older)]);

    const res = await lookup(a.world, uuid, a.key);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body).toEqual({
      uuid,
      name: "Ada Lovelace",
      email: "ada@example.com",
      type: "visitor",
      consents: {
        newsletter: { granted: false, decidedAt: newer },
        events: { granted: null, decidedAt: older },
      },
    });
  });

  it("applies the ordering rule inside one batch too, and a newer decision replaces an older one", async () => {
    const uuid = randomUUID();
    const t1 = at(-50_000);
    const t2 = at(-40_000);
    const t3 = at(-20_000);
    await sendEvents([consentChanged(a, uuid, "community", true, t2), consentChanged(a, uuid, "community", false, t1)]);
    expect((await lookup(a.world, uuid, a.key)).body.consents.community).toEqual({ granted: true, decidedAt: t2 });
    await sendEvents([consentChanged(a, uuid, "community", null, t3)]);
    const res = await lookup(a.world, uuid, a.key);
    // A consent.changed for an unknown person creates the record: email and type, no name yet.
    expect(res.body).toEqual({ uuid, name: null, email: "ada@example.com", type: "visitor", consents: { community: { granted: null, decidedAt: t3 } } });
  });

  it("refuses an event whose uuid the directory cannot hold, storing nothing", async () => {
    const res = await fetch(`${ingest.url}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(consentChanged(a, "u".repeat(201), "custom", true, at(0))),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errors: unknown }).errors).toEqual([{ pointer: "/data/uuid", detail: "must be at most 200 characters long" }]);
  });
});

describe("GET /api/v1/worlds/{worldSlug}/members/{uuid}", () => {
  let uuid: string;
  beforeAll(async () => {
    uuid = randomUUID();
    await sendEvents([visitorRegistered(a, uuid, "Grace Hopper", "grace@example.com", at(-10_000))]);
  });

  it("answers the record with a key of the world", async () => {
    const res = await lookup(a.world, uuid, a.key);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ uuid, name: "Grace Hopper", email: "grace@example.com", type: "visitor", consents: {} });
  });

  it("is 403 with a key of another world", async () => {
    const res = await lookup(a.world, uuid, b.key);
    expect(res.status).toBe(403);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(res.text).not.toContain("grace@example.com");
  });

  it("is 401 with WWW-Authenticate: Bearer without a key, or with an unknown one", async () => {
    for (const key of [null, `vwk_${randomBytes(32).toString("base64url")}`]) {
      const res = await lookup(a.world, uuid, key);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer realm="inbound-api"/);
    }
  });

  it("is 401 with a revoked key once the key cache's lifetime has passed", async () => {
    const created = await h.request("POST", `/admin/v1/worlds/${a.org}/${a.world}/api-keys`, { body: {} });
    expect((await lookup(a.world, uuid, created.body.token)).status).toBe(200);
    expect((await h.request("DELETE", `/admin/v1/worlds/${a.org}/${a.world}/api-keys/${created.body.id}`)).status).toBe(204);
    clock += 5_001;
    expect((await lookup(a.world, uuid, created.body.token)).status).toBe(401);
  });

  it("is 404 for an unknown uuid and for a member of another world", async () => {
    const elsewhere = randomUUID();
    await sendEvents([visitorRegistered(b, elsewhere, "Other", "other@example.com", at(-10_000))]);
    expect((await lookup(b.world, elsewhere, b.key)).status).toBe(200);
    for (const id of [randomUUID(), elsewhere, "x".repeat(500)]) {
      const res = await lookup(a.world, id, a.key);
      expect(res.status).toBe(404);
      expect(res.text).not.toContain("other@example.com");
    }
  });

  it("never logs names or emails", async () => {
    const lines = JSON.stringify(h.logs) + ingest.stderr();
    for (const personal of ["Ada Lovelace", "ada@example.com", "Grace Hopper", "grace@example.com", "other@example.com"]) expect(lines).not.toContain(personal);
  });
});

describe("platform member intake (event-ingest)", () => {
  it("creates (201) and replaces (200) a member, keeping consents; a deleted member is gone (204, then 404)", async () => {
    const uuid = randomUUID();
    const created = await intake("PUT", a, uuid, { name: "Invited Member", email: "invited@example.com", type: "member" });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ uuid, name: "Invited Member", email: "invited@example.com", type: "member", consents: {} });
    const decided = at(-5_000);
    await sendEvents([consentChanged(a, uuid, "third_party", true, decided, "invited@example.com")]);
    const replaced = await intake("PUT", a, uuid, { name: "Renamed Member", email: "renamed@example.com", type: "member" });
    expect(replaced.status).toBe(200);
    expect(replaced.body.consents).toEqual({ third_party: { granted: true, decidedAt: decided } });
    expect((await lookup(a.world, uuid, a.key)).body.name).toBe("Renamed Member");
    // An event older than the intake's replacement does not bring the old email back.
    await sendEvents([consentChanged(a, uuid, "custom", false, at(-4_000), "stale@example.com")]);
    expect((await lookup(a.world, uuid, a.key)).body.email).toBe("renamed@example.com");

    expect((await intake("DELETE", a, uuid)).status).toBe(204);
    expect((await lookup(a.world, uuid, a.key)).status).toBe(404);
    expect((await intake("DELETE", a, uuid)).status).toBe(404);
    // A late delivery about the deleted member does not bring them back; a newer one does.
    await sendEvents([consentChanged(a, uuid, "events", true, at(-3_000), "invited@example.com")]);
    expect((await lookup(a.world, uuid, a.key)).status).toBe(404);
    await sendEvents([consentChanged(a, uuid, "events", true, at(60_000), "back@example.com")]);
    expect((await lookup(a.world, uuid, a.key)).body).toMatchObject({ name: null, email: "back@example.com", consents: { events: { granted: true } } });
  });

  it("refuses a bad body (400 naming each member), an unknown world (404) and a missing token (401)", async () => {
    const bad = await intake("PUT", a, randomUUID(), { name: "", email: "not-an-email", type: "admin", extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(["/email", "/extra", "/name", "/type"]);
    const unknown = await intake("PUT", { ...a, world: "no-such-world" }, randomUUID(), { name: "N", email: "n@example.com", type: "member" });
    expect(unknown.status).toBe(404);
    const res = await fetch(`${ingest.url}/v1/worlds/${a.org}/${a.world}/members/${randomUUID()}`, { method: "DELETE" });
    expect(res.status).toBe(401);
    // Text PostgreSQL cannot store (NUL) in a path is refused before any route runs, naming the segment.
    const profile = { name: "N", email: "n@example.com", type: "member" };
    for (const answer of [
      await intake("PUT", { ...a, org: "a\u0000b" }, randomUUID(), profile),
      await intake("PUT", a, "\u0000", profile),
      await intake("DELETE", a, "\u0000"),
      await lookup(a.world, "\u0000", a.key),
    ]) {
      expect(answer.status).toBe(400);
      expect(answer.body.type).toMatch(/\/problems\/invalid-path$/);
      expect(answer.body.parameter).toMatch(/^path segment \d+$/);
    }
  });
});
