/**
 * Delivery-log maintenance against the real PostgreSQL: partitions ready ahead for the configured
 * horizon; expired days dropped as whole partitions (attempts, deliveries and events) while
 * deliveries are being written, without an error or a lost attempt, and with them the rows of
 * those days in the tables that are not partitioned (the deliveries' states, the events' keys:
 * an expired event's id is accepted again); younger history kept.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createPgPool, deliveryCreatedAt, DeliveryHistory, DeliveryLog, LOG_TABLES, LogPartitions, newDeliveryId, pgRunner, utcDay, newEventRowId, type AttemptApplication, type PgPool } from "@vw/db";
import { eventually, GiveUp } from "@vw/testing";
import { runRetention } from "../src/retention.js";
import { startHarness, type Harness } from "./harness.js";

const DAY = 86_400_000;
let h: Harness;
let pool: PgPool;
beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  pool = createPgPool(h.databaseUrl, { max: 4 });
});
afterAll(async () => {
  await pool.end();
  await h.close();
});

/** An attempt of `deliveryId` as the worker's group commit records it: delivered, or refused (the delivery then failed). */
function attemptOf(deliveryId: string, endpointId: string, createdAt: Date, startedAt: Date, outcome: "delivered" | "failed" = "delivered"): AttemptApplication {
  return {
    attempt: {
      id: randomUUID(),
      deliveryId,
      attemptNumber: 1,
      trigger: "initial",
      startedAt,
      requestHeaders: { "webhook-id": deliveryId },
      responseStatus: outcome === "delivered" ? 200 : 400,
      responseHeaders: {},
      responseBody: "ok",
      responseBodyTruncated: false,
      durationMs: 7,
      errorKind: null,
      error: null,
      verdict: outcome === "delivered" ? "delivered" : "rejected",
    },
    endpointId,
    deliveryCreatedAt: createdAt,
    becomes: outcome,
    dueAt: null,
    waitReason: null,
    run: 0,
    failures: "none",
  };
}

describe("retention", () => {
  it("keeps daily partitions of the three tables ready for the configured horizon", async () => {
    const result = await runRetention(pool, { retentionDays: 36_500, partitionsAheadDays: 9 });
    const partitions = new LogPartitions(pool);
    const wanted = Array.from({ length: 10 }, (_, i) => utcDay(new Date(Date.now() + i * DAY)));
    for (const table of LOG_TABLES) {
      const days = (await partitions.list(table)).map((p) => p.day);
      expect({ table, missing: wanted.filter((d) => !days.includes(d)) }).toEqual({ table, missing: [] });
    }
    // A second run finds nothing to do: creating ahead is idempotent.
    expect((await runRetention(pool, { retentionDays: 36_500, partitionsAheadDays: 9 })).partitionsCreated).toBe(0);
    expect(result.dropped).toEqual([]);
  });

  it("drops whole expired days while deliveries are written, without an error or a lost attempt, and keeps younger history", async () => {
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: "https://example.com/hook" });
    const log = new DeliveryLog(pgRunner(pool));
    const history = new DeliveryHistory(pgRunner(pool));
    const now = new Date();
    // 400 days is past the 90 days of retention asked for below; 60 days is within it.
    const oldAt = new Date(now.getTime() - 400 * DAY);
    const youngAt = new Date(now.getTime() - 60 * DAY);
    for (const at of [oldAt, youngAt]) await pool.query("SELECT vw_create_log_partitions($1::date, $1::date)", [utcDay(at)]);
    // Each day gets, as an intake stores them, two events with their keys and deliveries: one
    // delivery delivered (no state left), one that failed (its final state stays).
    const seeded = { old: { at: oldAt, deliveries: [] as string[], producerIds: [] as string[] }, young: { at: youngAt, deliveries: [] as string[], producerIds: [] as string[] } };
    for (const [age, day] of Object.entries(seeded)) {
      const events = ["delivered", "failed"].map((outcome) => ({ rowId: newEventRowId(), worldId: world.id, producerId: `retention-${age}-${outcome}-${randomUUID()}`, type: "visitor.registered", occurredAt: day.at.toISOString() }));
      const deliveries = events.map((e) => ({ id: newDeliveryId(day.at), endpointId: endpoint.id, worldId: world.id, type: e.type, body: Buffer.from(`{"age":"${age}"}`), event: { rowId: e.rowId, producerId: e.producerId } }));
      const stored = await log.transaction((tx) => log.storeIntake({ events, deliveries }, day.at, tx));
      expect(stored.created).toHaveLength(2);
      await log.record([attemptOf(deliveries[0]!.id, endpoint.id, day.at, day.at, "delivered"), attemptOf(deliveries[1]!.id, endpoint.id, day.at, day.at, "failed")]);
      day.deliveries.push(...deliveries.map((d) => d.id));
      day.producerIds.push(...events.map((e) => e.producerId));
    }
    const statesOf = async (ids: string[]) => (await pool.query<{ delivery_id: string; status: string }>("SELECT delivery_id, status FROM delivery_states WHERE delivery_id = ANY($1::uuid[])", [ids])).rows;
    const keysOf = async (producerIds: string[]) =>
      (await pool.query<{ producer_id: string }>("SELECT producer_id FROM webhook_event_keys WHERE world_id = $1 AND producer_id = ANY($2::text[]) ORDER BY producer_id", [world.id, producerIds])).rows.map((r) => r.producer_id);
    for (const day of Object.values(seeded)) {
      expect(await statesOf(day.deliveries)).toEqual([{ delivery_id: day.deliveries[1], status: "failed" }]);
      expect(await keysOf(day.producerIds)).toEqual([...day.producerIds].sort());
    }

    // Writers keep going while the expired day is detached and dropped.
    let stop = false;
    const written: string[] = [];
    let writerFailure: unknown;
    const writer = (async () => {
      while (!stop) {
        const ids = Array.from({ length: 10 }, () => newDeliveryId());
        await log.create(ids.map((id) => ({ id, endpointId: endpoint.id, worldId: world.id, type: "visitor.registered", body: Buffer.from("{}") })));
        await log.record(ids.map((id) => attemptOf(id, endpoint.id, deliveryCreatedAt(id), new Date())));
        written.push(...ids);
      }
    })().catch((err: unknown) => {
      writerFailure = err;
    });
    const wrote = (count: number) =>
      eventually(
        `the writer stored ${count} deliveries`,
        () => {
          if (writerFailure !== undefined) throw new GiveUp(`the writer failed: ${String(writerFailure)}`);
          return written.length >= count;
        },
        { intervalMs: 5 },
      );
    await wrote(20);
    const oldDay = utcDay(oldAt).replace(/-/g, "");
    // A run that finds the retention lock held (another replica's run) does nothing: ask again
    // until this one has run.
    const retention = { retentionDays: 90, partitionsAheadDays: 7, now };
    const result = await eventually(`this test's retention run dropped the partitions of ${oldDay}`, async () => {
      const run = await runRetention(pool, retention);
      return run.dropped.some((d) => d.partition.endsWith(`_p${oldDay}`)) && run;
    });
    await wrote(written.length + 20);
    stop = true;
    await writer;
    expect(writerFailure).toBeUndefined();

    expect(result.dropped.map((d) => d.partition)).toEqual(expect.arrayContaining(LOG_TABLES.map((t) => `${t}_p${oldDay}`)));
    // The expired day is gone from every table: its deliveries and their attempts, the final
    // state of the one that failed, its events and their keys.
    for (const id of seeded.old.deliveries) expect(await history.find(endpoint.id, id)).toBeNull();
    expect(await statesOf(seeded.old.deliveries)).toEqual([]);
    expect(await keysOf(seeded.old.producerIds)).toEqual([]);
    // The younger day is all there.
    const [youngDelivered, youngFailed] = seeded.young.deliveries as [string, string];
    expect(await history.find(endpoint.id, youngDelivered)).toMatchObject({ id: youngDelivered, status: "delivered", attemptCount: 1 });
    expect(await history.find(endpoint.id, youngFailed)).toMatchObject({ id: youngFailed, status: "failed", attemptCount: 1 });
    expect((await history.get(endpoint.id, youngDelivered))!.attempts).toHaveLength(1);
    expect(await statesOf(seeded.young.deliveries)).toEqual([{ delivery_id: youngFailed, status: "failed" }]);
    expect(await keysOf(seeded.young.producerIds)).toEqual([...seeded.young.producerIds].sort());
    const events = await pool.query<{ producer_id: string }>("SELECT producer_id FROM webhook_events WHERE world_id = $1 ORDER BY producer_id", [world.id]);
    expect(events.rows.map((r) => r.producer_id)).toEqual([...seeded.young.producerIds].sort());
    // An expired event's id is no longer known: offered again, it is a new event; a younger one's is still a duplicate.
    const again = [seeded.old.producerIds[0]!, seeded.young.producerIds[0]!].sort().map((producerId) => ({ rowId: newEventRowId(), worldId: world.id, producerId, type: "visitor.registered", occurredAt: now.toISOString() }));
    const offered = await log.transaction((tx) => log.storeIntake({ events: again, deliveries: [] }, new Date(), tx));
    expect(offered.fresh.map((e) => e.producerId)).toEqual([seeded.old.producerIds[0]]);
    // Every delivery written meanwhile is there with its attempt.
    const counts = await pool.query<{ deliveries: number; attempts: number }>(
      `SELECT (SELECT count(*)::int FROM webhook_deliveries WHERE id = ANY($1::uuid[])) AS deliveries,
              (SELECT count(*)::int FROM delivery_attempts WHERE delivery_id = ANY($1::uuid[])) AS attempts`,
      [written],
    );
    expect(counts.rows[0]).toEqual({ deliveries: written.length, attempts: written.length });
  });
});
