/**
 * event-ingest holds to its connection budget under load: a real process with a small
 * DATABASE_POOL_MAX takes concurrent event intakes, member intakes, analytics and auth hook calls,
 * and PostgreSQL (pg_stat_activity, polled throughout) never lists more of its connections than
 * DATABASE_POOL_MAX plus the LISTEN connection, each named `event-ingest`. Issue 48: one process
 * used to open up to 25 (an intake pool, the auth hook's pool, Prisma's pool, the LISTEN client).
 * No timing is asserted: the load only has to be concurrent enough to use the pool.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createPgPool, type PgPool } from "@vw/db";
import { spawnService, watchConnections, type ServiceProcess } from "@vw/testing";
import { generateSecretBoxKey } from "@vw/webhook-core";
import { startIngest, type IngestHarness } from "./harness.js";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const POOL_MAX = 3;
/** The auth hook's LISTEN connection (to DIRECT_URL, here the same server) comes on top of the pool. */
const LISTEN = 1;
const TOKEN = `budget-ingest-${randomBytes(12).toString("hex")}`;

let h: IngestHarness;
let ingest: ServiceProcess;
let observer: PgPool;
const pgPort = Number(new URL(process.env.DATABASE_URL as string).port || 5432);

beforeAll(async () => {
  h = await startIngest();
  observer = createPgPool(process.env.DATABASE_URL as string, { max: 1 });
  ingest = await spawnService(
    serviceDir,
    {
      DATABASE_URL: process.env.DATABASE_URL as string,
      DATABASE_POOL_MAX: String(POOL_MAX),
      REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      REDIS_KEY_PREFIX: h.keyPrefix,
      INGEST_TOKEN: TOKEN,
      SECRETS_ENCRYPTION_KEY: generateSecretBoxKey(),
    },
    { readyTimeoutMs: 60_000 },
  );
}, 90_000);

afterAll(async () => {
  await ingest?.stop();
  await observer?.end();
  await h?.close();
});

const call = (method: string, path: string, body: unknown) =>
  fetch(`${ingest.url}${path}`, { method, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: JSON.stringify(body) }).then(async (res) => {
    await res.arrayBuffer();
    return res.status;
  });

function analyticsEvent(uuid: string) {
  const at = new Date().toISOString();
  const room = "https://play.example.test/@/o/w/room";
  return { id: randomUUID(), type: "area.dwell", timestamp: at, data: { eventName: "area.dwell", source: "front", eventTime: at, user: { uuid }, room: { url: room }, properties: {} } };
}

describe("event-ingest's connections under load", () => {
  it(`never exceed DATABASE_POOL_MAX (${POOL_MAX}) + its LISTEN connection, all named event-ingest`, async () => {
    const worlds = await Promise.all([h.createWorld(), h.createWorld()]);
    for (const world of worlds) await h.createEndpoint(world, { subscriptions: ["visitor", "analytics"] });
    const pid = ingest.child.pid as number;
    const watch = watchConnections(observer, pid, pgPort);

    // Every kind of request that reaches PostgreSQL, 40 at a time.
    const requests: (() => Promise<number>)[] = [];
    for (let i = 0; i < 240; i += 1) {
      const world = worlds[i % worlds.length]!;
      const uuid = randomUUID();
      switch (i % 4) {
        case 0:
          requests.push(() => call("POST", "/v1/events", { id: randomUUID(), world: world.ref, type: "visitor.registered", timestamp: new Date().toISOString(), data: { uuid, name: "N", email: "n@example.test", via: "email" } }));
          break;
        case 1:
          requests.push(() => call("PUT", `/v1/worlds/${world.organizationSlug}/${world.slug}/members/${uuid}`, { name: "M", email: "m@example.test", type: "member" }));
          break;
        case 2:
          requests.push(() => call("POST", "/v1/analytics", { world: world.ref, events: [analyticsEvent(uuid)] }));
          break;
        default:
          // An unknown world is never cached: every call reads the database.
          requests.push(() => call("POST", "/v1/auth-hook", { world: `${world.organizationSlug}/missing-${i}`, roomUrl: "https://play.example.test/@/o/w/room", uuid }));
      }
    }
    const statuses: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 40 }, async () => {
        while (next < requests.length) statuses.push(await (requests[next++] as () => Promise<number>)());
      }),
    );
    const seen = await watch.stop();

    // The load was served (no 5xx), and concurrent enough to use more than one connection.
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.filter((s) => s === 202 || s === 200 || s === 201).length).toBeGreaterThan(0);
    expect(seen.samples).toBeGreaterThan(0);
    expect(seen.max).toBeGreaterThan(1);
    expect(seen.max).toBeLessThanOrEqual(POOL_MAX + LISTEN);
    expect([...seen.applicationNames]).toEqual(["event-ingest"]);
  }, 180_000);
});
