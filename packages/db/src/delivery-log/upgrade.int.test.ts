/**
 * The partitioning migration upgrades a database in place: rows written by the previous
 * (unpartitioned) schema are still there afterwards, found by their v4 ids, with their attempts
 * and their events' producer ids. Runs the migrations on a scratch database of its own.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import pg from "pg";
import { DeliveryHistory } from "./delivery-history.js";
import { DeliveryLog, newDeliveryId } from "./delivery-log.js";
import { pgRunner } from "./sql-runner.js";

const migrationsDir = join(dirname(fileURLToPath(import.meta.url)), "../../prisma/migrations");
const PARTITIONING = "20261123130000_partitioned_delivery_log";
const dbName = `history_upgrade_${randomBytes(4).toString("hex")}`;
let admin: pg.Client;
let pool: pg.Pool;

beforeAll(async () => {
  const url = new URL(process.env.DATABASE_URL!);
  const adminUrl = new URL(url);
  adminUrl.pathname = "/postgres";
  admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  url.pathname = `/${dbName}`;
  pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  // An idle connection ended from outside (the database dropped at the end) must not crash the run.
  pool.on("error", () => undefined);
});
afterAll(async () => {
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
});

/** Applies the migrations older than the partitioning one, or that one and every later one (an upgrade to today). */
async function migrate(which: "before" | "partitioning"): Promise<void> {
  const folders = readdirSync(migrationsDir).filter((f) => /^\d{14}_/.test(f)).sort();
  const selected = which === "before" ? folders.filter((f) => f < PARTITIONING) : folders.filter((f) => f >= PARTITIONING);
  for (const folder of selected) await pool.query(readFileSync(join(migrationsDir, folder, "migration.sql"), "utf8"));
}

it("keeps the rows of a pre-partitioning database: deliveries, attempts and dedupe records", async () => {
  await migrate("before");
  const org = randomUUID();
  const world = randomUUID();
  const endpoint = randomUUID();
  const event = randomUUID();
  const delivery = randomUUID();
  const old = new Date(Date.now() - 30 * 86_400_000);
  await pool.query("INSERT INTO organizations (id, slug, name, updated_at) VALUES ($1, 'acme', 'Acme', now())", [org]);
  await pool.query("INSERT INTO worlds (id, organization_id, slug, name, admin_emails, updated_at) VALUES ($1, $2, 'lobby', 'Lobby', '{}', now())", [world, org]);
  await pool.query(
    "INSERT INTO webhook_endpoints (id, world_id, url, subscriptions, format, api_version, updated_at) VALUES ($1, $2, 'https://example.com/h', '{visitor}', 'current', '2026-11-01', now())",
    [endpoint, world],
  );
  await pool.query("INSERT INTO webhook_events (id, world_id, producer_id, type, occurred_at, created_at) VALUES ($1, $2, 'evt-1', 'visitor.registered', $3, $3)", [event, world, old]);
  await pool.query(
    `INSERT INTO webhook_deliveries (id, endpoint_id, world_id, event_id, type, body, status, attempt_count, last_status, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'visitor.registered', convert_to('{"old":true}', 'UTF8'), 'delivered', 1, 200, $5, $5)`,
    [delivery, endpoint, world, event, old],
  );
  await pool.query(
    `INSERT INTO delivery_attempts (id, delivery_id, attempt_number, trigger, started_at, request_headers, response_status, duration_ms, verdict)
     VALUES ($1, $2, 1, 'initial', $3, '{"webhook-id":"x"}', 200, 12, 'delivered')`,
    [randomUUID(), delivery, old],
  );

  await migrate("partitioning");

  const history = new DeliveryHistory(pgRunner(pool));
  const found = await history.get(endpoint, delivery);
  expect(found).toMatchObject({ id: delivery, status: "delivered", attemptCount: 1, lastStatus: 200, eventId: "evt-1", createdAt: old });
  expect(found!.body.toString()).toBe('{"old":true}');
  expect(found!.attempts).toMatchObject([{ attemptNumber: 1, responseStatus: 200, durationMs: 12, verdict: "delivered" }]);
  expect((await history.list(endpoint, { eventId: "evt-1" }, { limit: 5 }))!.map((d) => d.id)).toEqual([delivery]);
  // The dedupe record still deduplicates, and the upgraded database takes new deliveries.
  const log = new DeliveryLog(pgRunner(pool));
  const again = await log.intake({ events: [{ organizationSlug: "acme", worldSlug: "lobby", producerId: "evt-1" }], subscriptions: [] }, (worlds) => ({
    events: worlds.map((w) => ({ rowId: randomUUID(), worldId: w.id, producerId: "evt-1", type: "visitor.registered", occurredAt: old.toISOString() })),
    deliveries: [],
  }));
  expect(again.fresh).toEqual([]);
  expect(again.known.map((k) => k.worldId)).toEqual([world]);
  const id = newDeliveryId();
  await log.create([{ id, endpointId: endpoint, worldId: world, type: "visitor.registered", body: Buffer.from("{}") }]);
  expect(await history.find(endpoint, id)).toMatchObject({ id, status: "pending" });
  const kinds = await pool.query<{ relname: string; relkind: string }>(
    "SELECT relname, relkind FROM pg_class WHERE relname IN ('webhook_events', 'webhook_deliveries', 'delivery_attempts') ORDER BY relname",
  );
  expect(kinds.rows.map((r) => r.relkind)).toEqual(["p", "p", "p"]);
});
