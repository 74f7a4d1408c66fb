/**
 * DeliveryLog + DeliveryHistory against the real PostgreSQL: the list filters, lookups (UUIDv7 and
 * pre-partitioning v4 ids) and the 24 h stats return exactly what was written.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually } from "@vw/testing";
import pg from "pg";
import { createPrismaClient, type PrismaClient } from "../index.js";
import { DeliveryHistory } from "./delivery-history.js";
import { DeliveryLog, deliveryCreatedAt, newDeliveryId, newEventRowId } from "./delivery-log.js";
import type { AttemptResult, NewDelivery } from "./log-types.js";
import { pgRunner, prismaRunner } from "./sql-runner.js";

let prisma: PrismaClient;
let pool: pg.Pool;
const prefix = `dlt${randomBytes(3).toString("hex")}-`;

beforeAll(() => {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error("DATABASE_URL is not set: run through jest (test/global-setup.js)");
  prisma = createPrismaClient(url, { max: 2 });
  pool = new pg.Pool({ connectionString: url, max: 3 });
});
afterAll(async () => {
  await prisma.organization.deleteMany({ where: { slug: { startsWith: prefix } } });
  await prisma.$disconnect();
  await pool.end();
});

interface EndpointFixture {
  worldId: string;
  endpointId: string;
  organizationSlug: string;
  worldSlug: string;
}

async function endpointFixture(): Promise<EndpointFixture> {
  const org = await prisma.organization.create({ data: { slug: `${prefix}${randomBytes(3).toString("hex")}`, name: "Org" } });
  const world = await prisma.world.create({ data: { organizationId: org.id, slug: "w", name: "W", adminEmails: [] } });
  const endpoint = await prisma.webhookEndpoint.create({
    data: { worldId: world.id, url: "https://example.com/hook", subscriptions: ["visitor", "recording"], format: "current", apiVersion: "2026-11-01" },
  });
  return { worldId: world.id, endpointId: endpoint.id, organizationSlug: org.slug, worldSlug: world.slug };
}

/**
 * `log.intake` of events (producer id, type) in the worlds of `fixtures`, each event with one
 * delivery to its world's endpoint; `meanwhile` runs after the plan is made, before the log stores it.
 */
function intakeOf(log: DeliveryLog, events: { fixture: EndpointFixture; producerId: string; type: string }[], meanwhile?: () => Promise<void>) {
  return log.intake(
    { events: events.map((e) => ({ organizationSlug: e.fixture.organizationSlug, worldSlug: e.fixture.worldSlug, producerId: e.producerId })), subscriptions: ["visitor", "recording"] },
    async (worlds, createdAt) => {
      const planned = events.map((e) => {
        const world = worlds.find((w) => w.id === e.fixture.worldId)!;
        expect(world.endpoints.map((x) => x.id)).toEqual([e.fixture.endpointId]);
        const event = { rowId: newEventRowId(), worldId: world.id, producerId: e.producerId, type: e.type, occurredAt: new Date().toISOString() };
        const delivery: NewDelivery = { id: newDeliveryId(createdAt), endpointId: e.fixture.endpointId, worldId: world.id, type: e.type, body: Buffer.from(`{"e":"${e.producerId}"}`), event: { rowId: event.rowId, producerId: e.producerId } };
        return { event, delivery };
      });
      await meanwhile?.();
      return { events: planned.map((p) => p.event), deliveries: planned.map((p) => p.delivery) };
    },
  );
}

function result(d: { id: string; endpointId: string }, n: number, durationMs: number, verdict: "delivered" | "retry" | "gone" | "rejected", status: "delivered" | "pending" | "failed", responseStatus: number | null): AttemptResult {
  return {
    attempt: {
      id: randomUUID(),
      deliveryId: d.id,
      attemptNumber: n,
      trigger: n === 1 ? "initial" : "retry",
      startedAt: new Date(),
      requestHeaders: { "webhook-id": d.id },
      responseStatus,
      responseHeaders: responseStatus === null ? null : { "content-type": "text/plain" },
      responseBody: responseStatus === null ? null : "answer",
      responseBodyTruncated: false,
      durationMs,
      errorKind: responseStatus === null ? "timeout" : null,
      error: responseStatus === null ? "timed out" : null,
      verdict,
    },
    endpointId: d.endpointId,
    deliveryCreatedAt: deliveryCreatedAt(d.id),
    status,
    nextAttemptAt: status === "pending" ? new Date(Date.now() + 60_000) : null,
    counts: true,
    succeeded: verdict === "delivered",
  };
}

describe("DeliveryHistory", () => {
  it("filters by status, type, time range and the producer's event id, keyset-paginated, and finds by deliveryId", async () => {
    const fixture = await endpointFixture();
    const { endpointId } = fixture;
    const log = new DeliveryLog(pgRunner(pool));
    const history = new DeliveryHistory(prismaRunner(prisma));
    const events = ["ev-a", "ev-b", "ev-c"].map((producerId) => ({ fixture, producerId, type: producerId === "ev-c" ? "recording.completed" : "visitor.registered" }));
    const intake = await intakeOf(log, events);
    expect(intake.fresh).toHaveLength(3);
    // A known event again: nothing new stored (its planned delivery is dropped); its delivery, never attempted, is named for queueing again.
    const again = await intakeOf(log, [events[0]!]);
    expect({ fresh: again.fresh.length, created: again.created, unattempted: again.unattempted }).toEqual({ fresh: 0, created: [], unattempted: [{ deliveryId: intake.created[0]!.id, endpointId, run: 0 }] });
    const stored = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1", [endpointId]);
    expect(stored.rows[0]!.n).toBe(3);

    const [a, b, c] = intake.created as [NewDelivery, NewDelivery, NewDelivery];
    await log.recordAttempts([result(a, 1, 40, "delivered", "delivered", 200), result(b, 1, 400, "rejected", "failed", 400)]);
    const all = (await history.list(endpointId, {}, { limit: 10 }))!;
    expect(all.map((d) => d.id)).toEqual([a.id, b.id, c.id].sort().reverse());
    expect(all.find((d) => d.id === a.id)).toMatchObject({ status: "delivered", attemptCount: 1, lastStatus: 200, eventId: "ev-a", type: "visitor.registered" });

    const ids = async (filter: Parameters<DeliveryHistory["list"]>[1]) => (await history.list(endpointId, filter, { limit: 10 }))!.map((d) => d.id);
    expect(await ids({ status: "failed" })).toEqual([b.id]);
    expect(await ids({ status: "pending" })).toEqual([c.id]);
    expect(await ids({ type: "recording.completed" })).toEqual([c.id]);
    expect(await ids({ eventId: "ev-b" })).toEqual([b.id]);
    expect(await ids({ eventId: "nope" })).toEqual([]);
    const createdAt = deliveryCreatedAt(a.id);
    expect((await ids({ since: createdAt })).sort()).toEqual([a.id, b.id, c.id].sort());
    expect(await ids({ until: createdAt })).toEqual([]);
    expect(await ids({ since: new Date(createdAt.getTime() + 1) })).toEqual([]);

    const first = (await history.list(endpointId, {}, { limit: 2 }))!;
    const next = (await history.list(endpointId, {}, { limit: 2, after: first.at(-1)!.id }))!;
    expect([...first, ...next].map((d) => d.id)).toEqual(all.map((d) => d.id));
    expect(await history.list(endpointId, {}, { limit: 2, after: randomUUID() })).toBeNull();

    const detail = (await history.get(endpointId, b.id))!;
    expect(detail.body.toString()).toBe('{"e":"ev-b"}');
    expect(detail.attempts).toMatchObject([{ attemptNumber: 1, responseStatus: 400, verdict: "rejected", durationMs: 400 }]);
    expect(await history.get(randomUUID(), b.id)).toBeNull();
  });

  it("finds a delivery with an old random (v4) id, and Replay requeues then restores it", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const log = new DeliveryLog(prismaRunner(prisma));
    const history = new DeliveryHistory(pgRunner(pool));
    const id = randomUUID(); // what the unpartitioned schema wrote
    await log.create([{ id, endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") }]);
    const stored = (await history.find(endpointId, id))!;
    await log.recordAttempts([{ ...result({ id, endpointId }, 1, 10, "rejected", "failed", 404), deliveryCreatedAt: stored.createdAt }]);
    expect(await history.find(endpointId, id)).toMatchObject({ id, status: "failed" });
    expect((await history.get(endpointId, id))!.attempts).toHaveLength(1);

    const [requeued] = await log.requeue(endpointId, [id], { onlyStatus: "failed" });
    expect(requeued).toMatchObject({ deliveryId: id, previous: { status: "failed" } });
    expect((await history.find(endpointId, id))!.status).toBe("pending");
    await log.restore(requeued!);
    expect((await history.find(endpointId, id))!.status).toBe("failed");
  });

  it("keeps the endpoint's 24 h stats exactly as written: counts by status, attempts, latency percentiles and the last attempt", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const history = new DeliveryHistory(pgRunner(pool));
    expect(await history.stats(endpointId)).toMatchObject({
      deliveries: { total: 0, delivered: 0, failed: 0, pending: 0, skipped: 0 },
      attempts: { total: 0, succeeded: 0, failed: 0 },
      successRate: null,
      latencyMs: null,
      lastAttempt: null,
    });
    const log = new DeliveryLog(pgRunner(pool));
    const ds = Array.from({ length: 10 }, () => ({ id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") }));
    await log.create(ds);
    // 8 delivered at first try (30 ms), 1 retried then failed (2 attempts at 3000 ms), 1 left pending; then one skipped by a disable.
    await log.recordAttempts(ds.slice(0, 8).map((d) => result(d, 1, 30, "delivered", "delivered", 200)));
    await log.recordAttempts([result(ds[8]!, 1, 3000, "retry", "pending", 503)]);
    await log.recordAttempts([result(ds[8]!, 2, 3000, "retry", "failed", null)]);
    const extra = { id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") };
    await log.create([extra]);
    await log.markSkipped(extra.id, deliveryCreatedAt(extra.id));

    const stats = await history.stats(endpointId);
    expect(stats.deliveries).toEqual({ total: 11, delivered: 8, failed: 1, pending: 1, skipped: 1 });
    expect(stats.attempts).toEqual({ total: 10, succeeded: 8, failed: 2 });
    expect(stats.successRate).toBe(0.8);
    // 8 of 10 in the (25, 50] ms bucket and the observed maximum 3000 ms: p50 inside the first, p99 the maximum.
    expect(stats.latencyMs!.p50).toBeGreaterThanOrEqual(25);
    expect(stats.latencyMs!.p50).toBeLessThanOrEqual(50);
    expect(stats.latencyMs!.p99).toBe(3000);
    expect(stats.lastAttempt).toMatchObject({ status: null, outcome: "retry" });
    expect(stats.until.getTime() - stats.since.getTime()).toBeGreaterThanOrEqual(24 * 3600_000);
  });

  it("sums several endpoints' figures, and counts attempts per clock hour of the window, every hour present", async () => {
    const [a, b, other] = [await endpointFixture(), await endpointFixture(), await endpointFixture()];
    const log = new DeliveryLog(pgRunner(pool));
    const history = new DeliveryHistory(prismaRunner(prisma));
    const now = new Date();
    const hourOf = (t: number) => Math.floor(t / 3600_000) * 3600_000;
    // Attempts 25 h ago (outside the window), 23 h 30 ago, 3 h ago and now, on two endpoints; a third endpoint is not asked for.
    const plan: { fixture: EndpointFixture; agoMs: number; verdict: "delivered" | "retry" }[] = [
      { fixture: a, agoMs: 25 * 3600_000, verdict: "delivered" },
      { fixture: a, agoMs: 23.5 * 3600_000, verdict: "delivered" },
      { fixture: b, agoMs: 23.5 * 3600_000, verdict: "retry" },
      { fixture: a, agoMs: 3 * 3600_000, verdict: "retry" },
      { fixture: b, agoMs: 3 * 3600_000, verdict: "retry" },
      { fixture: b, agoMs: 3 * 3600_000, verdict: "delivered" },
      { fixture: b, agoMs: 0, verdict: "delivered" },
      { fixture: other, agoMs: 0, verdict: "retry" },
    ];
    for (const p of plan) {
      const d = { id: newDeliveryId(), endpointId: p.fixture.endpointId, worldId: p.fixture.worldId, type: "visitor.registered", body: Buffer.from("{}") };
      await log.create([d]);
      const r = result(d, 1, 40, p.verdict, p.verdict === "delivered" ? "delivered" : "pending", p.verdict === "delivered" ? 200 : 503);
      r.attempt.startedAt = new Date(now.getTime() - p.agoMs);
      await log.recordAttempts([r]);
    }

    const stats = await history.stats([a.endpointId, b.endpointId], now);
    expect(stats.attempts).toEqual({ total: 6, succeeded: 3, failed: 3 });
    expect(stats.deliveries.total).toBe(8 - 1); // the deliveries are created now: all but the other endpoint's in the window
    const hours = stats.attemptsByHour;
    // From the hour holding the window's start to the hour holding now: always 25 clock hours.
    expect(hours).toHaveLength(25);
    expect(hours[0]!.hour.getTime()).toBe(hourOf(stats.since.getTime()));
    expect(hours.at(-1)!.hour.getTime()).toBe(hourOf(now.getTime()));
    expect(hours.map((h) => h.hour.getTime())).toEqual(hours.map((_, i) => hours[0]!.hour.getTime() + i * 3600_000));
    const at = (agoMs: number) => hours.find((h) => h.hour.getTime() === hourOf(now.getTime() - agoMs));
    expect(at(23.5 * 3600_000)).toMatchObject({ succeeded: 1, failed: 1 });
    expect(at(3 * 3600_000)).toMatchObject({ succeeded: 1, failed: 2 });
    expect(at(0)).toMatchObject({ succeeded: 1, failed: 0 });
    expect(hours.reduce((n, h) => n + h.succeeded, 0)).toBe(stats.attempts.succeeded);
    expect(hours.reduce((n, h) => n + h.failed, 0)).toBe(stats.attempts.failed);

    // One endpoint alone, and no endpoint at all (a world without endpoints): zeros, every hour present.
    expect((await history.stats(a.endpointId, now)).attempts).toEqual({ total: 2, succeeded: 1, failed: 1 });
    const none = await history.stats([], now);
    expect(none.attempts.total).toBe(0);
    expect(none.attemptsByHour.length).toBe(hours.length);
    expect(none.attemptsByHour.every((h) => h.succeeded === 0 && h.failed === 0)).toBe(true);
  });

  it("rolls attempts up per endpoint and 5-minute bucket exactly as a scan of them would, over several statements", async () => {
    const endpoints = [await endpointFixture(), await endpointFixture(), await endpointFixture()];
    // One connection, so one rollup row per (endpoint, bucket): the deliveries' rollup creates it
    // (an empty histogram), then each of the three statements below adds to it (ON CONFLICT).
    const onePool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
    const log = new DeliveryLog(pgRunner(onePool));
    const now = Date.now();
    // Durations on and around the histogram's bounds, two buckets, equal start times: the rollup is
    // checked against a plain computation of the same rows, not against the trigger's own idea.
    const durations = [0, 4, 5, 6, 10, 24, 25, 49, 50, 99, 100, 2999, 3000, 29_999, 30_000, 45_000];
    const bounds = [5, 10, 25, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 15000, 30000];
    const results: AttemptResult[] = [];
    try {
      for (let i = 0; i < 60; i += 1) {
        const { worldId, endpointId } = endpoints[i % 3]!;
        const d = { id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") };
        await log.create([d]);
        const verdict = (["delivered", "retry", "rejected"] as const)[i % 4 === 0 ? 1 : i % 7 === 0 ? 2 : 0]!;
        const r = result(d, 1 + (i % 3), durations[i % durations.length]!, verdict, verdict === "retry" ? "pending" : verdict === "delivered" ? "delivered" : "failed", verdict === "retry" ? 503 : 200);
        // A third start six minutes earlier (the previous bucket); pairs share a start time.
        r.attempt.startedAt = new Date(now - (i % 3 === 2 ? 6 * 60_000 : 0) - Math.floor(i / 6) * 1000);
        results.push(r);
      }
      // Later statements hold earlier starts: the row's last attempt must stay the latest one.
      for (let i = 0; i < results.length; i += 20) await log.recordAttempts(results.slice(i, i + 20));
    } finally {
      await onePool.end();
    }

    const bucketOf = (t: Date) => Math.floor(t.getTime() / 300_000) * 300_000;
    type Roll = { attempts: number; succeeded: number; counts: number[]; max: number; last: AttemptResult };
    const expected = new Map<string, Roll>();
    for (const r of results) {
      const key = `${r.endpointId} ${bucketOf(r.attempt.startedAt)}`;
      const roll = expected.get(key) ?? { attempts: 0, succeeded: 0, counts: Array<number>(21).fill(0), max: 0, last: r };
      roll.attempts += 1;
      if (r.attempt.verdict === "delivered") roll.succeeded += 1;
      roll.counts[bounds.filter((b) => b <= r.attempt.durationMs).length]! += 1;
      roll.max = Math.max(roll.max, r.attempt.durationMs);
      const later = (a: AttemptResult, b: AttemptResult) =>
        a.attempt.startedAt.getTime() - b.attempt.startedAt.getTime() || a.attempt.attemptNumber - b.attempt.attemptNumber;
      if (later(r, roll.last) > 0) roll.last = r;
      expected.set(key, roll);
    }
    const { rows } = await pool.query<{ endpoint_id: string; bucket: Date; attempts: number; attempts_succeeded: number; latency_counts: number[]; latency_max_ms: number; last_attempt_at: Date; last_attempt_status: number | null; last_attempt_outcome: string }>(
      "SELECT * FROM endpoint_stats WHERE endpoint_id = ANY($1::uuid[]) AND attempts > 0",
      [endpoints.map((e) => e.endpointId)],
    );
    const actual = new Map(rows.map((row) => [`${row.endpoint_id} ${row.bucket.getTime()}`, row]));
    expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
    // Ties on (start, attempt number) have no single latest attempt: compare what is determined.
    for (const [key, roll] of expected) {
      const row = actual.get(key)!;
      expect({ key, attempts: row.attempts, succeeded: row.attempts_succeeded, counts: row.latency_counts, max: row.latency_max_ms, lastAt: row.last_attempt_at.getTime() }).toEqual({
        key,
        attempts: roll.attempts,
        succeeded: roll.succeeded,
        counts: roll.counts,
        max: roll.max,
        lastAt: roll.last.attempt.startedAt.getTime(),
      });
      const tied = results.filter(
        (r) => `${r.endpointId} ${bucketOf(r.attempt.startedAt)}` === key && r.attempt.startedAt.getTime() === roll.last.attempt.startedAt.getTime() && r.attempt.attemptNumber === roll.last.attempt.attemptNumber,
      );
      expect(tied.map((r) => `${r.attempt.responseStatus} ${r.attempt.verdict}`)).toContain(`${row.last_attempt_status} ${row.last_attempt_outcome}`);
    }
  });
});

describe("DeliveryLog.recordAttempts", () => {
  it("logs the batch when an endpoint of it was deleted while its attempt was in flight, leaving out only that endpoint's attempt", async () => {
    const kept = await endpointFixture();
    const gone = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const created: NewDelivery[] = [];
    for (const fixture of [kept, gone]) {
      const intake = await intakeOf(log, [{ fixture, producerId: `race-${fixture.endpointId}`, type: "visitor.registered" }]);
      created.push(...intake.created);
    }
    const [keptDelivery, goneDelivery] = created as [NewDelivery, NewDelivery];
    // Both were loaded and sent; then the second endpoint was deleted (its deliveries with it).
    await prisma.webhookEndpoint.delete({ where: { id: gone.endpointId } });
    const failures = await log.recordAttempts([result(keptDelivery, 1, 30, "rejected", "failed", 400), result(goneDelivery, 1, 30, "rejected", "failed", 400)]);

    expect(failures).toEqual([1, null]);
    const attempts = await pool.query<{ delivery_id: string }>("SELECT delivery_id FROM delivery_attempts WHERE delivery_id = ANY($1::uuid[])", [[keptDelivery.id, goneDelivery.id]]);
    expect(attempts.rows.map((r) => r.delivery_id)).toEqual([keptDelivery.id]);
    const deliveries = await pool.query<{ id: string; status: string }>("SELECT id, status FROM webhook_deliveries WHERE id = ANY($1::uuid[])", [[keptDelivery.id, goneDelivery.id]]);
    expect(deliveries.rows).toEqual([{ id: keptDelivery.id, status: "failed" }]);
  });
});

describe("DeliveryLog.intake and create", () => {
  it("makes a concurrent intake of the same event wait from its first statement to the commit, then find it known", async () => {
    const fixture = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    // The second intake runs on connections of its own, named, so the test can see them wait.
    const secondName = `intake-race-${randomUUID()}`;
    const secondPool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2, application_name: secondName });
    try {
      const event = { fixture, producerId: `race-${randomUUID()}`, type: "visitor.registered" };
      let second: Promise<{ fresh: unknown[]; created: unknown[] }> | undefined;
      let secondDone = false;
      const first = await intakeOf(log, [event], async () => {
        // The first statement has run (worlds read, keys locked); the event is not inserted yet.
        second = intakeOf(new DeliveryLog(pgRunner(secondPool)), [event]).finally(() => {
          secondDone = true;
        });
        await eventually("the second intake waits on a lock the first holds", async () => {
          const waiting = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [secondName]);
          return waiting.rows[0]!.n > 0;
        });
        expect(secondDone).toBe(false);
      });
      const after = await second!;
      expect({ first: [first.fresh.length, first.created.length], second: [after.fresh.length, after.created.length] }).toEqual({ first: [1, 1], second: [0, 0] });
      const rows = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_events WHERE world_id = $1 AND producer_id = $2", [fixture.worldId, event.producerId]);
      expect(rows.rows[0]!.n).toBe(1);
    } finally {
      await secondPool.end();
    }
  });

  it("reads the named worlds that exist with their endpoints of the subscriptions, plans generically, and stores nothing of an intake whose apply step fails", async () => {
    const fixture = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const ref = (worldSlug: string, producerId: string) => ({ organizationSlug: fixture.organizationSlug, worldSlug, producerId });
    const seen: string[] = [];
    const plan = (subscriptions: string[]) =>
      log.intake(
        { events: [ref(fixture.worldSlug, "x"), ref("no-such-world", "y"), ref(fixture.worldSlug, "z")], subscriptions },
        (worlds, createdAt) => {
          seen.push(worlds.map((w) => `${w.organizationSlug}/${w.worldSlug}: ${w.endpoints.map((e) => e.id).join(",")}`).join(" "));
          const events = ["x", "z"].map((producerId) => ({ rowId: newEventRowId(), worldId: fixture.worldId, producerId, type: "visitor.registered", occurredAt: createdAt.toISOString() }));
          const deliveries = events.map((e): NewDelivery => ({ id: newDeliveryId(createdAt), endpointId: fixture.endpointId, worldId: fixture.worldId, type: e.type, body: Buffer.from("{}"), event: { rowId: e.rowId, producerId: e.producerId } }));
          return { events, deliveries };
        },
        async (fresh, tx) => {
          // The member directory's step, failing after the events and deliveries were written.
          expect(fresh.map((f) => f.producerId)).toEqual(["x", "z"]);
          // The first statement switched the transaction to generic plans (see RESOLVE_AND_LOCK_EVENTS).
          const [setting] = await tx.query<{ mode: string }>({ name: "test-plan-cache-mode", text: "SELECT current_setting('plan_cache_mode') AS mode" }, []);
          expect(setting?.mode).toBe("force_generic_plan");
          throw new Error("apply failed");
        },
      );
    await expect(plan(["visitor"])).rejects.toThrow("apply failed");
    await expect(plan(["consent"])).rejects.toThrow("apply failed");
    expect(seen).toEqual([`${fixture.organizationSlug}/${fixture.worldSlug}: ${fixture.endpointId}`, `${fixture.organizationSlug}/${fixture.worldSlug}: `]);
    const rows = await pool.query<{ events: number; deliveries: number }>(
      "SELECT (SELECT count(*) FROM webhook_events WHERE world_id = $1)::int AS events, (SELECT count(*) FROM webhook_deliveries WHERE world_id = $1)::int AS deliveries",
      [fixture.worldId],
    );
    expect(rows.rows[0]).toEqual({ events: 0, deliveries: 0 });
  });

  it("leave out the deliveries of an endpoint deleted since the writer read it, instead of failing", async () => {
    const kept = await endpointFixture();
    const gone = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const events = [kept, gone].map((fixture) => ({ fixture, producerId: `gone-${randomUUID()}`, type: "visitor.registered" }));
    // The plan was made from endpoints read before; one of them is deleted meanwhile.
    const intake = await intakeOf(log, events, () => prisma.webhookEndpoint.delete({ where: { id: gone.endpointId } }).then(() => undefined));
    expect(intake.fresh).toHaveLength(2);
    expect(intake.created.map((d) => d.endpointId)).toEqual([kept.endpointId]);
    const stored = await pool.query<{ endpoint_id: string }>("SELECT endpoint_id FROM webhook_deliveries WHERE id = ANY($1::uuid[])", [intake.created.map((d) => d.id)]);
    expect(stored.rows).toEqual([{ endpoint_id: kept.endpointId }]);

    // The same through Prisma's runner (the analytics flush's writer), with ids stored already.
    const again = await endpointFixture();
    await prisma.webhookEndpoint.delete({ where: { id: again.endpointId } });
    const other = { id: newDeliveryId(), endpointId: kept.endpointId, worldId: kept.worldId, type: "visitor.registered", body: Buffer.from("{}") };
    const viaPrisma = new DeliveryLog(prismaRunner(prisma));
    const n = await viaPrisma.create([other, { ...other, id: newDeliveryId(), endpointId: again.endpointId, worldId: again.worldId }], { ignoreExisting: true });
    expect(n).toBe(1);
    expect(await viaPrisma.create([other], { ignoreExisting: true })).toBe(0);
  });

  it("recordFinished leaves out the delivery and attempt of an endpoint deleted meanwhile, and stores the others", async () => {
    const kept = await endpointFixture();
    const gone = await endpointFixture();
    await prisma.webhookEndpoint.delete({ where: { id: gone.endpointId } });
    const finished = [kept, gone].map(({ worldId, endpointId }) => {
      const delivery = { id: newDeliveryId(), endpointId, worldId, type: "member.connecting", body: Buffer.from("{}") };
      return { delivery, test: false, attempt: result(delivery, 1, 12, "delivered", "delivered", 200).attempt, finishedAt: new Date() };
    });
    await new DeliveryLog(pgRunner(pool)).recordFinished(finished);
    const ids = finished.map((f) => f.delivery.id);
    const deliveries = await pool.query<{ id: string; status: string }>("SELECT id, status FROM webhook_deliveries WHERE id = ANY($1::uuid[])", [ids]);
    expect(deliveries.rows).toEqual([{ id: ids[0], status: "delivered" }]);
    const attempts = await pool.query<{ delivery_id: string }>("SELECT delivery_id FROM delivery_attempts WHERE delivery_id = ANY($1::uuid[])", [ids]);
    expect(attempts.rows).toEqual([{ delivery_id: ids[0] }]);
  });
});
