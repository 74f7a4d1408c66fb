/**
 * The delivery log's migrations upgrade a database in place, each test on a scratch database of
 * its own, migrated up to a migration, given rows in the shape the schema had then, and migrated
 * to today:
 * - the partitioning migration: rows written by the unpartitioned schema are still there, found
 *   by their v4 ids, with their attempts and their events' producer ids;
 * - the delivery states migration (one job per delivery to endpoint drains): every pending, failed
 *   and skipped delivery moves into `delivery_states` with its schedule (a pending one with its
 *   bytes and due time, due at once when it never had one), a delivered one has no state, and every
 *   accepted event id keeps deduplicating through `webhook_event_keys`. The drains then claim what
 *   is due from PostgreSQL, and the reconciler finds the endpoints to wake.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { DeliveryHistory } from "./delivery-history.js";
import { DeliveryLog, newDeliveryId, newEventRowId, type StoredIntake } from "./delivery-log.js";
import { pgRunner } from "./sql-runner.js";

const migrationsDir = join(dirname(fileURLToPath(import.meta.url)), "../../prisma/migrations");
const PARTITIONING = "20261123130000_partitioned_delivery_log";
const DELIVERY_STATES = "20261129100000_delivery_states";
const DAY_MS = 86_400_000;

let admin: pg.Client;
const scratch: { name: string; pool: pg.Pool }[] = [];

beforeAll(async () => {
  const adminUrl = new URL(process.env.DATABASE_URL!);
  adminUrl.pathname = "/postgres";
  admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
});
afterAll(async () => {
  for (const { name, pool } of scratch) {
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
  await admin.end();
});

/** A new empty database (dropped after the file), and a pool on it. */
async function scratchDatabase(): Promise<pg.Pool> {
  const name = `history_upgrade_${randomBytes(4).toString("hex")}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  // An idle connection ended from outside (the database dropped at the end) must not crash the run.
  pool.on("error", () => undefined);
  scratch.push({ name, pool });
  return pool;
}

/** Applies the migrations older than `upgrade` ("before"), or that one and every later one ("upgrade": to today). */
async function migrate(pool: pg.Pool, upgrade: string, which: "before" | "upgrade"): Promise<void> {
  const folders = readdirSync(migrationsDir).filter((f) => /^\d{14}_/.test(f)).sort();
  expect(folders).toContain(upgrade);
  const selected = which === "before" ? folders.filter((f) => f < upgrade) : folders.filter((f) => f >= upgrade);
  for (const folder of selected) await pool.query(readFileSync(join(migrationsDir, folder, "migration.sql"), "utf8"));
}

/** An organization, a world and an endpoint, in the columns every schema since the first has. */
async function seedEndpoint(pool: pg.Pool): Promise<{ world: string; endpoint: string }> {
  const org = randomUUID();
  const world = randomUUID();
  const endpoint = randomUUID();
  await pool.query("INSERT INTO organizations (id, slug, name, updated_at) VALUES ($1, 'acme', 'Acme', now())", [org]);
  await pool.query("INSERT INTO worlds (id, organization_id, slug, name, admin_emails, updated_at) VALUES ($1, $2, 'lobby', 'Lobby', '{}', now())", [world, org]);
  await pool.query(
    "INSERT INTO webhook_endpoints (id, world_id, url, subscriptions, format, api_version, updated_at) VALUES ($1, $2, 'https://example.com/h', '{visitor}', 'current', '2026-11-01', now())",
    [endpoint, world],
  );
  return { world, endpoint };
}

/** An intake of one event (producer id) in acme/lobby, as event-ingest runs it; its fan-out gives no delivery. */
function intakeOf(log: DeliveryLog, producerId: string): Promise<StoredIntake> {
  return log.transaction(async (tx) => {
    const worlds = await log.resolveIntake([{ organizationSlug: "acme", worldSlug: "lobby", producerId }], tx);
    const events = worlds.map((w) => ({ rowId: newEventRowId(), worldId: w.id, producerId, type: "visitor.registered", occurredAt: new Date().toISOString() }));
    return log.storeIntake({ events, deliveries: [] }, new Date(), tx);
  });
}

describe("upgrades of the delivery log", () => {
  it("keeps the rows of a pre-partitioning database: deliveries, attempts and dedupe records", async () => {
    const pool = await scratchDatabase();
    await migrate(pool, PARTITIONING, "before");
    const { world, endpoint } = await seedEndpoint(pool);
    const event = randomUUID();
    const delivery = randomUUID();
    const old = new Date(Date.now() - 30 * DAY_MS);
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

    await migrate(pool, PARTITIONING, "upgrade");

    const history = new DeliveryHistory(pgRunner(pool));
    const found = await history.get(endpoint, delivery);
    expect(found).toMatchObject({ id: delivery, status: "delivered", attemptCount: 1, lastStatus: 200, eventId: "evt-1", createdAt: old });
    expect(found!.body.toString()).toBe('{"old":true}');
    expect(found!.attempts).toMatchObject([{ attemptNumber: 1, responseStatus: 200, durationMs: 12, verdict: "delivered" }]);
    expect((await history.list(endpoint, { eventId: "evt-1" }, { limit: 5 }))!.map((d) => d.id)).toEqual([delivery]);
    // The dedupe record still deduplicates, and the upgraded database takes new deliveries.
    const log = new DeliveryLog(pgRunner(pool));
    expect((await intakeOf(log, "evt-1")).fresh).toEqual([]);
    expect((await intakeOf(log, "evt-2")).fresh.map((e) => e.producerId)).toEqual(["evt-2"]);
    const id = newDeliveryId();
    await log.create([{ id, endpointId: endpoint, worldId: world, type: "visitor.registered", body: Buffer.from("{}") }]);
    expect(await history.find(endpoint, id)).toMatchObject({ id, status: "pending" });
    const kinds = await pool.query<{ relname: string; relkind: string }>(
      "SELECT relname, relkind FROM pg_class WHERE relname IN ('webhook_events', 'webhook_deliveries', 'delivery_attempts') ORDER BY relname",
    );
    expect(kinds.rows.map((r) => r.relkind)).toEqual(["p", "p", "p"]);
  });

  it("moves every pending, failed and skipped delivery into delivery_states with its schedule, and the drains take over from there", async () => {
    const pool = await scratchDatabase();
    await migrate(pool, DELIVERY_STATES, "before");
    const { world, endpoint } = await seedEndpoint(pool);
    const now = Date.now();
    const yesterday = new Date(now - DAY_MS);
    const lastMonth = new Date(now - 30 * DAY_MS);
    await pool.query("SELECT vw_create_log_partitions($1::date, $1::date)", [lastMonth.toISOString().slice(0, 10)]);

    // Deliveries as the one-job-per-delivery schema wrote them (status and schedule on the row).
    interface OldDelivery {
      at: Date;
      status: "pending" | "delivered" | "failed" | "skipped";
      attempts: number;
      lastStatus: number | null;
      nextAttemptAt: Date | null;
      run: number;
      runAttempts: number;
      test?: boolean;
    }
    const later = new Date(now + 3600_000);
    const old: Record<string, OldDelivery> = {
      // Never attempted, stored without a due time by a writer older than the schedule of record.
      fresh: { at: new Date(now - 5000), status: "pending", attempts: 0, lastStatus: null, nextAttemptAt: null, run: 0, runAttempts: 0 },
      retrying: { at: yesterday, status: "pending", attempts: 2, lastStatus: 503, nextAttemptAt: later, run: 0, runAttempts: 2 },
      replayed: { at: lastMonth, status: "pending", attempts: 3, lastStatus: 500, nextAttemptAt: new Date(now - 1000), run: 1, runAttempts: 0 },
      failed: { at: lastMonth, status: "failed", attempts: 3, lastStatus: 500, nextAttemptAt: null, run: 0, runAttempts: 3 },
      skipped: { at: yesterday, status: "skipped", attempts: 1, lastStatus: 503, nextAttemptAt: null, run: 0, runAttempts: 1 },
      delivered: { at: yesterday, status: "delivered", attempts: 2, lastStatus: 200, nextAttemptAt: null, run: 0, runAttempts: 2 },
      test: { at: yesterday, status: "failed", attempts: 1, lastStatus: 404, nextAttemptAt: null, run: 0, runAttempts: 1, test: true },
    };
    const ids: Record<string, string> = {};
    for (const [name, d] of Object.entries(old)) {
      const id = newDeliveryId(d.at);
      ids[name] = id;
      const event = randomUUID();
      await pool.query("INSERT INTO webhook_events (id, world_id, producer_id, type, occurred_at, created_at) VALUES ($1, $2, $3, 'visitor.registered', $4, $4)", [event, world, `evt-${name}`, d.at]);
      await pool.query(
        `INSERT INTO webhook_deliveries (id, endpoint_id, world_id, event_id, event_producer_id, type, body, test, status, attempt_count, last_status, next_attempt_at, run, run_attempts, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 'visitor.registered', convert_to($6, 'UTF8'), $7, $8, $9, $10, $11, $12, $13, $14, $14)`,
        [id, endpoint, world, event, `evt-${name}`, `{"was":"${name}"}`, d.test ?? false, d.status, d.attempts, d.lastStatus, d.nextAttemptAt, d.run, d.runAttempts, d.at],
      );
      for (let n = 1; n <= d.attempts; n += 1) {
        await pool.query(
          `INSERT INTO delivery_attempts (id, delivery_id, delivery_created_at, endpoint_id, attempt_number, trigger, started_at, request_headers, response_status, duration_ms, verdict)
           VALUES ($1, $2, $3, $4, $5, 'initial', $6, '{}', $7, 10, $8)`,
          [randomUUID(), id, d.at, endpoint, n, new Date(d.at.getTime() + n * 1000), n === d.attempts ? d.lastStatus : 503, n === d.attempts && d.status === "delivered" ? "delivered" : "retry"],
        );
      }
    }
    // The same event id accepted twice on two days (the older schema's dedupe was per intake): one key, the first day's.
    await pool.query("INSERT INTO webhook_events (id, world_id, producer_id, type, occurred_at, created_at) VALUES ($1, $2, 'evt-twice', 'visitor.registered', $3, $3), ($4, $2, 'evt-twice', 'visitor.registered', $5, $5)", [
      randomUUID(),
      world,
      lastMonth,
      randomUUID(),
      yesterday,
    ]);

    await migrate(pool, DELIVERY_STATES, "upgrade");

    // The states, exactly: pending ones with their bytes and due times, final ones without.
    const { rows } = await pool.query<{ delivery_id: string; status: string; due_at: Date | null; run: number; run_attempts: number; attempt_count: number; last_status: number | null; body: Buffer | null; test: boolean; claimed_until: Date | null; created_at: Date; endpoint_id: string }>(
      "SELECT delivery_id, status, due_at, run, run_attempts, attempt_count, last_status, body, test, claimed_until, created_at, endpoint_id FROM delivery_states",
    );
    const byName = new Map(rows.map((row) => [Object.keys(ids).find((name) => ids[name] === row.delivery_id) ?? row.delivery_id, row]));
    expect([...byName.keys()].sort()).toEqual(["failed", "fresh", "replayed", "retrying", "skipped", "test"]);
    for (const [name, row] of byName) {
      const d = old[name]!;
      expect({ name, ...row, body: row.body?.toString() ?? null }).toEqual({
        name,
        delivery_id: ids[name],
        endpoint_id: endpoint,
        created_at: d.at,
        status: d.status,
        due_at: d.status === "pending" ? (d.nextAttemptAt ?? d.at) : null,
        run: d.run,
        run_attempts: d.runAttempts,
        attempt_count: d.attempts,
        last_status: d.lastStatus,
        body: d.status === "pending" ? `{"was":"${name}"}` : null,
        test: d.test ?? false,
        claimed_until: null,
      });
    }
    const columns = await pool.query<{ column_name: string }>("SELECT column_name FROM information_schema.columns WHERE table_name = 'webhook_deliveries' ORDER BY column_name");
    expect(columns.rows.map((c) => c.column_name)).not.toContain("status");

    // The history reads the same statuses as before the upgrade.
    const history = new DeliveryHistory(pgRunner(pool));
    for (const [name, d] of Object.entries(old)) {
      expect({ name, ...(await history.find(endpoint, ids[name]!)) }).toMatchObject({ name, status: d.status, attemptCount: d.attempts, lastStatus: d.lastStatus, eventId: `evt-${name}` });
    }
    expect((await history.list(endpoint, { status: "pending" }, { limit: 10 }))!.map((d) => d.id).sort()).toEqual([ids.fresh, ids.retrying, ids.replayed].sort());
    expect((await history.list(endpoint, { status: "delivered" }, { limit: 10 }))!.map((d) => d.id)).toEqual([ids.delivered]);

    // The reconciler finds the endpoint (due since the oldest due time), and a drain claims what is due now, in its run.
    const log = new DeliveryLog(pgRunner(pool));
    expect(await log.dueEndpoints()).toEqual([{ endpointId: endpoint, dueAt: old.fresh!.at }]);
    const claimed = await log.claim([{ endpointId: endpoint, limit: 10 }], 60_000);
    expect(claimed.map((c) => ({ id: c.deliveryId, run: c.run, runAttempts: c.runAttempts, attemptCount: c.attemptCount, body: c.body.toString() })).sort((a, b) => a.id.localeCompare(b.id))).toEqual(
      (["fresh", "replayed"] as const).map((name) => ({ id: ids[name]!, run: old[name]!.run, runAttempts: old[name]!.runAttempts, attemptCount: old[name]!.attempts, body: `{"was":"${name}"}` })).sort((a, b) => a.id.localeCompare(b.id)),
    );
    // recover of a failed one: pending again, in a new run.
    expect(await log.requeue(endpoint, [ids.failed!], { onlyStatus: "failed" })).toEqual([ids.failed]);
    expect(await history.find(endpoint, ids.failed!)).toMatchObject({ status: "pending", attemptCount: 3 });

    // Every event id accepted before the upgrade is still known; a new one is not.
    for (const producerId of [...Object.keys(old).map((name) => `evt-${name}`), "evt-twice"]) expect({ producerId, fresh: (await intakeOf(log, producerId)).fresh }).toEqual({ producerId, fresh: [] });
    expect((await intakeOf(log, "evt-new")).fresh.map((e) => e.producerId)).toEqual(["evt-new"]);
    const twice = await pool.query<{ created_at: Date }>("SELECT created_at FROM webhook_event_keys WHERE world_id = $1 AND producer_id = 'evt-twice'", [world]);
    expect(twice.rows).toEqual([{ created_at: lastMonth }]);
  });
});
