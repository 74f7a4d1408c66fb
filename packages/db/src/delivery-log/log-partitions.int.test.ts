/**
 * The delivery log's partitions carry the autovacuum thresholds a day's partition needs under a
 * steady load (see the migration 20261128100000_log_partition_autovacuum): the ones the migrations
 * made, and every one made afterwards. Retention drops the expired days with what the tables that
 * are not partitioned hold of them: the states of their deliveries and their events' keys.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { createTestDatabase } from "@vw/testing";
import { createPgPool, type PgPool } from "../client.js";
import { DeliveryHistory } from "./delivery-history.js";
import { DeliveryLog, newDeliveryId, newEventRowId } from "./delivery-log.js";
import { LOG_TABLES, LogPartitions, utcDay } from "./log-partitions.js";
import type { AttemptApplication, NewDelivery } from "./log-types.js";
import { pgRunner } from "./sql-runner.js";

let pool: PgPool;
beforeAll(() => {
  pool = createPgPool(process.env.DATABASE_URL!, { max: 2 });
});
afterAll(() => pool.end());

async function optionsOf(table: string): Promise<Map<string, string[]>> {
  const { rows } = await pool.query<{ relname: string; reloptions: string[] | null }>(
    `SELECT c.relname, c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = $1`,
    [table],
  );
  return new Map(rows.map((r) => [r.relname, r.reloptions ?? []]));
}

it("vacuums and analyzes deliveries' and attempts' partitions at 2% of changes, those made later included", async () => {
  await new LogPartitions(pool).ensureAhead(10);
  for (const table of ["webhook_deliveries", "delivery_attempts"]) {
    const partitions = await optionsOf(table);
    expect(partitions.size).toBeGreaterThan(10);
    for (const [name, options] of partitions) {
      expect({ name, options: [...options].sort() }).toEqual({
        name,
        options: ["autovacuum_analyze_scale_factor=0.02", "autovacuum_vacuum_insert_scale_factor=0.02", "autovacuum_vacuum_scale_factor=0.02"],
      });
    }
  }
  // The deduplication records are only inserted: PostgreSQL's defaults suit them.
  for (const [name, options] of await optionsOf("webhook_events")) expect({ name, options }).toEqual({ name, options: [] });
});

it("drops the expired days with their deliveries' states and their events' keys, and keeps younger ones", async () => {
  // A database of its own: retention drops every expired day of its database, whoever wrote it.
  const db = await createTestDatabase();
  const own = createPgPool(db.url, { max: 2 });
  try {
    const DAY = 86_400_000;
    const now = new Date();
    const oldAt = new Date(now.getTime() - 100 * DAY);
    const youngAt = new Date(now.getTime() - 60 * DAY);
    for (const at of [oldAt, youngAt]) await own.query("SELECT vw_create_log_partitions($1::date, $1::date)", [utcDay(at)]);
    const [org, world, endpoint] = [randomUUID(), randomUUID(), randomUUID()];
    await own.query("INSERT INTO organizations (id, slug, name, updated_at) VALUES ($1, $2, 'Org', now())", [org, `ret-${randomBytes(3).toString("hex")}`]);
    await own.query("INSERT INTO worlds (id, organization_id, slug, name, admin_emails, updated_at) VALUES ($1, $2, 'w', 'W', '{}', now())", [world, org]);
    await own.query(
      "INSERT INTO webhook_endpoints (id, world_id, url, subscriptions, format, api_version, updated_at) VALUES ($1, $2, 'https://example.com/h', '{visitor}', 'current', '2026-11-01', now())",
      [endpoint, world],
    );
    const orgSlug = (await own.query<{ slug: string }>("SELECT slug FROM organizations WHERE id = $1", [org])).rows[0]!.slug;
    const log = new DeliveryLog(pgRunner(own));
    const intake = (producerIds: string[], createdAt: Date) =>
      log.transaction(async (tx) => {
        await log.resolveIntake(producerIds.map((producerId) => ({ organizationSlug: orgSlug, worldSlug: "w", producerId })), tx);
        const events = producerIds.map((producerId) => ({ rowId: newEventRowId(), worldId: world, producerId, type: "visitor.registered", occurredAt: createdAt.toISOString() }));
        const deliveries = events.map((e): NewDelivery => ({ id: newDeliveryId(createdAt), endpointId: endpoint, worldId: world, type: e.type, body: Buffer.from("{}"), event: { rowId: e.rowId, producerId: e.producerId } }));
        return log.storeIntake({ events, deliveries }, createdAt, tx);
      });
    const outcome = (d: NewDelivery, becomes: "delivered" | "failed", createdAt: Date): AttemptApplication => ({
      attempt: {
        id: randomUUID(),
        deliveryId: d.id,
        attemptNumber: 1,
        trigger: "initial",
        startedAt: new Date(),
        requestHeaders: {},
        responseStatus: becomes === "delivered" ? 200 : 400,
        responseHeaders: {},
        responseBody: "",
        responseBodyTruncated: false,
        durationMs: 5,
        errorKind: null,
        error: null,
        verdict: becomes === "delivered" ? "delivered" : "rejected",
      },
      endpointId: endpoint,
      deliveryCreatedAt: createdAt,
      becomes,
      dueAt: null,
      waitReason: null,
      run: 0,
      failures: "none",
    });
    // Each day: one delivered, one failed, one skipped, one still pending (every kind of state, and none).
    const days = { old: oldAt, young: youngAt };
    const seeded: Record<keyof typeof days, NewDelivery[]> = { old: [], young: [] };
    for (const [age, at] of Object.entries(days) as [keyof typeof days, Date][]) {
      const stored = await intake(["delivered", "failed", "skipped", "pending"].map((kind) => `${age}-${kind}`), at);
      expect(stored.created).toHaveLength(4);
      const [delivered, failed, skipped] = stored.created as [NewDelivery, NewDelivery, NewDelivery, NewDelivery];
      await log.record([outcome(delivered, "delivered", at), outcome(failed, "failed", at)]);
      expect(await log.skip([skipped.id])).toBe(1);
      seeded[age] = stored.created;
    }
    const statesOf = async (ds: NewDelivery[]) =>
      (await own.query<{ status: string }>("SELECT status FROM delivery_states WHERE delivery_id = ANY($1::uuid[]) ORDER BY status", [ds.map((d) => d.id)])).rows.map((r) => r.status);
    expect(await statesOf(seeded.old)).toEqual(["failed", "pending", "skipped"]);

    const result = await new LogPartitions(own).dropExpired(90, now);
    const oldDay = utcDay(oldAt).replace(/-/g, "");
    expect(result.map((d) => d.partition).sort()).toEqual(LOG_TABLES.map((t) => `${t}_p${oldDay}`).sort());

    // The old day's states are gone with its deliveries; the young day's stay.
    expect(await statesOf(seeded.old)).toEqual([]);
    expect(await statesOf(seeded.young)).toEqual(["failed", "pending", "skipped"]);
    const history = new DeliveryHistory(pgRunner(own));
    expect(await history.find(endpoint, seeded.old[1]!.id)).toBeNull();
    expect(await history.find(endpoint, seeded.young[1]!.id)).toMatchObject({ status: "failed" });
    expect((await history.list(endpoint, { status: "failed" }, { limit: 10 }))!.map((d) => d.id)).toEqual([seeded.young[1]!.id]);
    // No pending delivery of a dropped day is left to claim or to wake (its bytes are gone with it).
    expect((await log.claim([{ endpointId: endpoint, limit: 10 }], 60_000)).map((c) => c.deliveryId)).toEqual([seeded.young[3]!.id]);

    // The old day's event ids can be accepted again; the young day's still deduplicate.
    const keys = await own.query<{ producer_id: string }>("SELECT producer_id FROM webhook_event_keys WHERE world_id = $1 ORDER BY producer_id", [world]);
    expect(keys.rows.map((r) => r.producer_id)).toEqual(["young-delivered", "young-failed", "young-pending", "young-skipped"]);
    const again = await intake(["old-failed", "young-failed"], now);
    expect(again.fresh.map((e) => e.producerId)).toEqual(["old-failed"]);

    // A second run finds nothing more to drop.
    expect(await new LogPartitions(own).dropExpired(90, now)).toEqual([]);
  } finally {
    await own.end();
    await db.drop();
  }
});
