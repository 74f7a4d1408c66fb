/**
 * Delivery-log maintenance against the real PostgreSQL: partitions ready ahead for the configured
 * horizon; expired days dropped as whole partitions (attempts, deliveries and dedupe records) while
 * deliveries are being written, without an error or a lost attempt; younger history kept.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createPgPool, deliveryCreatedAt, DeliveryHistory, DeliveryLog, LOG_TABLES, LogPartitions, newDeliveryId, pgRunner, utcDay, type AttemptResult, type PgPool } from "@vw/db";
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

/** A finished attempt of `deliveryId`, as the worker records it. */
function attemptOf(deliveryId: string, endpointId: string, createdAt: Date, startedAt: Date): AttemptResult {
  return {
    attempt: {
      id: randomUUID(),
      deliveryId,
      attemptNumber: 1,
      trigger: "initial",
      startedAt,
      requestHeaders: { "webhook-id": deliveryId },
      responseStatus: 200,
      responseHeaders: {},
      responseBody: "ok",
      responseBodyTruncated: false,
      durationMs: 7,
      errorKind: null,
      error: null,
      verdict: "delivered",
    },
    endpointId,
    deliveryCreatedAt: createdAt,
    status: "delivered",
    nextAttemptAt: null,
    counts: false,
    succeeded: true,
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
    // Far older than any other test file's rows (the database is shared); 60 days is within retention.
    const oldAt = new Date(now.getTime() - 400 * DAY);
    const youngAt = new Date(now.getTime() - 60 * DAY);
    for (const at of [oldAt, youngAt]) await pool.query("SELECT vw_create_log_partitions($1::date, $1::date)", [utcDay(at)]);
    const seeded: Record<"old" | "young", string> = { old: newDeliveryId(oldAt), young: newDeliveryId(youngAt) };
    for (const [age, id] of Object.entries(seeded)) {
      const at = age === "old" ? oldAt : youngAt;
      await log.create([{ id, endpointId: endpoint.id, worldId: world.id, type: "visitor.registered", body: Buffer.from(`{"age":"${age}"}`) }]);
      await log.recordAttempts([attemptOf(id, endpoint.id, at, at)]);
      await pool.query("INSERT INTO webhook_events (id, world_id, producer_id, type, occurred_at, created_at) VALUES ($1, $2, $3, 'visitor.registered', $4, $4)", [
        randomUUID(),
        world.id,
        `retention-${age}-${randomUUID()}`,
        at.toISOString(),
      ]);
    }

    // Writers keep going while the expired day is detached and dropped.
    let stop = false;
    const written: string[] = [];
    let writerFailure: unknown;
    const writer = (async () => {
      while (!stop) {
        const ids = Array.from({ length: 10 }, () => newDeliveryId());
        await log.create(ids.map((id) => ({ id, endpointId: endpoint.id, worldId: world.id, type: "visitor.registered", body: Buffer.from("{}") })));
        await log.recordAttempts(ids.map((id) => attemptOf(id, endpoint.id, deliveryCreatedAt(id), new Date())));
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
    // The database is shared: another test file's worker may be running its own retention (a
    // century kept) at this very moment. It holds the lock and this run then does nothing, as a
    // second replica's would; ask again until this one has run.
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
    expect(await history.find(endpoint.id, seeded.old)).toBeNull();
    expect(await history.find(endpoint.id, seeded.young)).toMatchObject({ id: seeded.young, status: "delivered" });
    expect((await history.get(endpoint.id, seeded.young))!.attempts).toHaveLength(1);
    const events = await pool.query<{ producer_id: string }>("SELECT producer_id FROM webhook_events WHERE world_id = $1", [world.id]);
    expect(events.rows.map((r) => r.producer_id.split("-")[1])).toEqual(["young"]);
    // Every delivery written meanwhile is there with its attempt.
    const counts = await pool.query<{ deliveries: number; attempts: number }>(
      `SELECT (SELECT count(*)::int FROM webhook_deliveries WHERE id = ANY($1::uuid[])) AS deliveries,
              (SELECT count(*)::int FROM delivery_attempts WHERE delivery_id = ANY($1::uuid[])) AS attempts`,
      [written],
    );
    expect(counts.rows[0]).toEqual({ deliveries: written.length, attempts: written.length });
  });
});
