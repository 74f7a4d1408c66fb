/**
 * DeliveryLog + DeliveryHistory against the real PostgreSQL: the list filters, lookups (UUIDv7 and
 * pre-partitioning v4 ids) and the 24 h stats return exactly what was written; the intake's
 * transaction script deduplicates (also between concurrent intakes) and leaves out what is gone;
 * the group commit applies each attempt's fate to the delivery's state only in the attempt's run.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually } from "@vw/testing";
import pg from "pg";
import { createPrismaClient, type PrismaClient } from "../index.js";
import { DeliveryHistory } from "./delivery-history.js";
import { DeliveryLog, deliveryCreatedAt, newDeliveryId, newEventRowId, type StoredIntake } from "./delivery-log.js";
import type { AttemptApplication, DeliveryBecomes, FailureCountChange, IntakeEvent, NewDelivery } from "./log-types.js";
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
 * An intake as event-ingest's transaction script runs it (`resolveIntake`, a plan, `storeIntake`,
 * in one transaction of `log`): events (producer id, type) in the worlds of `fixtures`, each with
 * one delivery to its world's endpoint, in lock order; `meanwhile` runs after the worlds are read,
 * before the plan is stored; `after` runs in the transaction once it is stored.
 */
function intakeOf(
  log: DeliveryLog,
  events: { fixture: EndpointFixture; producerId: string; type: string }[],
  hooks: { meanwhile?: () => Promise<void>; after?: (stored: StoredIntake) => Promise<void> } = {},
): Promise<StoredIntake> {
  const createdAt = new Date();
  const ordered = [...events].sort((a, b) => `${a.fixture.worldId} ${a.producerId}`.localeCompare(`${b.fixture.worldId} ${b.producerId}`));
  return log.transaction(async (tx) => {
    const worlds = await log.resolveIntake(
      ordered.map((e) => ({ organizationSlug: e.fixture.organizationSlug, worldSlug: e.fixture.worldSlug, producerId: e.producerId })),
      tx,
    );
    const planned = ordered.map((e) => {
      const world = worlds.find((w) => w.id === e.fixture.worldId)!;
      expect(world.endpoints.map((x) => x.id)).toEqual([e.fixture.endpointId]);
      const event: IntakeEvent = { rowId: newEventRowId(), worldId: world.id, producerId: e.producerId, type: e.type, occurredAt: new Date().toISOString() };
      const delivery: NewDelivery = {
        id: newDeliveryId(createdAt),
        endpointId: e.fixture.endpointId,
        worldId: world.id,
        type: e.type,
        body: Buffer.from(`{"e":"${e.producerId}"}`),
        event: { rowId: event.rowId, producerId: e.producerId },
      };
      return { event, delivery };
    });
    await hooks.meanwhile?.();
    const stored = await log.storeIntake({ events: planned.map((p) => p.event), deliveries: planned.map((p) => p.delivery) }, createdAt, tx);
    await hooks.after?.(stored);
    return stored;
  });
}

/** An attempt of `d` as the worker's group commit records it, with what its fate decided. */
function application(
  d: { id: string; endpointId: string },
  n: number,
  durationMs: number,
  verdict: "delivered" | "retry" | "gone" | "rejected",
  becomes: DeliveryBecomes,
  responseStatus: number | null,
  options: { run?: number; failures?: FailureCountChange; createdAt?: Date } = {},
): AttemptApplication {
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
    deliveryCreatedAt: options.createdAt ?? deliveryCreatedAt(d.id),
    becomes,
    dueAt: becomes === "pending" ? new Date(Date.now() + 60_000) : null,
    waitReason: null,
    run: options.run ?? 0,
    failures: options.failures ?? (verdict === "delivered" ? "reset" : "increment"),
  };
}

interface StateRow {
  delivery_id: string;
  status: string;
  run: number;
  run_attempts: number;
  attempt_count: number;
  due: boolean;
  claimed: boolean;
  has_body: boolean;
}

/** The state rows of `ids` (none: delivered), by id. */
async function statesOf(ids: readonly string[]): Promise<Map<string, StateRow>> {
  const { rows } = await pool.query<StateRow>(
    `SELECT delivery_id, status, run, run_attempts, attempt_count, due_at <= now() AS due, claimed_until IS NOT NULL AS claimed, body IS NOT NULL AS has_body
     FROM delivery_states WHERE delivery_id = ANY($1::uuid[])`,
    [ids],
  );
  return new Map(rows.map((row) => [row.delivery_id, row]));
}

describe("DeliveryHistory", () => {
  it("filters by status, type, time range and the producer's event id, keyset-paginated, and finds by deliveryId", async () => {
    const fixture = await endpointFixture();
    const { endpointId } = fixture;
    const log = new DeliveryLog(pgRunner(pool));
    const history = new DeliveryHistory(prismaRunner(prisma));
    const events = ["ev-a", "ev-b", "ev-c"].map((producerId) => ({ fixture, producerId, type: producerId === "ev-c" ? "recording.completed" : "visitor.registered" }));
    const intake = await intakeOf(log, events);
    expect(intake.fresh.map((e) => e.producerId)).toEqual(["ev-a", "ev-b", "ev-c"]);
    expect(intake.created).toHaveLength(3);
    // A known event again: nothing new stored (its planned delivery is dropped). Its delivery,
    // never attempted, stays pending and due in PostgreSQL: the schedule of record, which the
    // drains claim from and the reconciler wakes from.
    const again = await intakeOf(log, [events[0]!]);
    expect({ fresh: again.fresh, created: again.created }).toEqual({ fresh: [], created: [] });
    const stored = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1", [endpointId]);
    expect(stored.rows[0]!.n).toBe(3);
    const [a, b, c] = intake.created as [NewDelivery, NewDelivery, NewDelivery];
    expect(await statesOf([a.id])).toEqual(new Map([[a.id, expect.objectContaining({ status: "pending", due: true, claimed: false, has_body: true })]]));
    expect(await log.dueEndpoints()).toContainEqual({ endpointId, dueAt: deliveryCreatedAt(a.id) });

    await log.record([application(a, 1, 40, "delivered", "delivered", 200), application(b, 1, 400, "rejected", "failed", 400)]);
    const all = (await history.list(endpointId, {}, { limit: 10 }))!;
    expect(all.map((d) => d.id)).toEqual([a.id, b.id, c.id].sort().reverse());
    expect(all.find((d) => d.id === a.id)).toMatchObject({ status: "delivered", attemptCount: 1, lastStatus: 200, eventId: "ev-a", type: "visitor.registered", nextAttemptAt: null });
    expect(all.find((d) => d.id === b.id)).toMatchObject({ status: "failed", attemptCount: 1, lastStatus: 400, nextAttemptAt: null });
    expect(all.find((d) => d.id === c.id)).toMatchObject({ status: "pending", attemptCount: 0, lastStatus: null, nextAttemptAt: deliveryCreatedAt(c.id) });
    // Delivered: no state row left; failed: a final one, without the bytes to send.
    const states = await statesOf([a.id, b.id]);
    expect([...states.keys()]).toEqual([b.id]);
    expect(states.get(b.id)).toMatchObject({ status: "failed", has_body: false });

    const ids = async (filter: Parameters<DeliveryHistory["list"]>[1]) => (await history.list(endpointId, filter, { limit: 10 }))!.map((d) => d.id);
    expect(await ids({ status: "failed" })).toEqual([b.id]);
    expect(await ids({ status: "pending" })).toEqual([c.id]);
    expect(await ids({ status: "delivered" })).toEqual([a.id]);
    expect(await ids({ status: "skipped" })).toEqual([]);
    expect(await ids({ type: "recording.completed" })).toEqual([c.id]);
    expect(await ids({ eventId: "ev-b" })).toEqual([b.id]);
    expect(await ids({ eventId: "nope" })).toEqual([]);
    const createdAt = deliveryCreatedAt(a.id);
    expect((await ids({ since: createdAt })).sort()).toEqual([a.id, b.id, c.id].sort());
    expect(await ids({ until: createdAt })).toEqual([]);
    expect(await ids({ since: new Date(createdAt.getTime() + 1) })).toEqual([]);
    expect(await ids({ status: "failed", since: createdAt, until: new Date(createdAt.getTime() + 1) })).toEqual([b.id]);

    const first = (await history.list(endpointId, {}, { limit: 2 }))!;
    const next = (await history.list(endpointId, {}, { limit: 2, after: first.at(-1)!.id }))!;
    expect([...first, ...next].map((d) => d.id)).toEqual(all.map((d) => d.id));
    expect(await history.list(endpointId, {}, { limit: 2, after: randomUUID() })).toBeNull();

    const detail = (await history.get(endpointId, b.id))!;
    expect(detail.body.toString()).toBe('{"e":"ev-b"}');
    expect(detail.attempts).toMatchObject([{ attemptNumber: 1, responseStatus: 400, verdict: "rejected", durationMs: 400 }]);
    expect((await history.get(endpointId, a.id))!.body.toString()).toBe('{"e":"ev-a"}');
    expect(await history.get(randomUUID(), b.id)).toBeNull();
  });

  it("finds a delivery with an old random (v4) id, and Replay puts it back to pending in a new run", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const log = new DeliveryLog(prismaRunner(prisma));
    const history = new DeliveryHistory(pgRunner(pool));
    const id = randomUUID(); // what the unpartitioned schema wrote
    await log.create([{ id, endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") }]);
    const stored = (await history.find(endpointId, id))!;
    expect(stored).toMatchObject({ id, status: "pending" });
    await log.record([application({ id, endpointId }, 1, 10, "rejected", "failed", 404, { createdAt: stored.createdAt })]);
    expect(await history.find(endpointId, id)).toMatchObject({ id, status: "failed", attemptCount: 1, lastStatus: 404 });
    expect((await history.get(endpointId, id))!.attempts).toHaveLength(1);
    expect(await history.find(randomUUID(), id)).toBeNull();

    expect(await log.requeue(endpointId, [id], { onlyStatus: "delivered" })).toEqual([]);
    expect(await log.requeue(endpointId, [id], { onlyStatus: "failed" })).toEqual([id]);
    expect(await history.find(endpointId, id)).toMatchObject({ status: "pending", attemptCount: 1 });
    expect((await statesOf([id])).get(id)).toMatchObject({ status: "pending", run: 1, run_attempts: 0, due: true, has_body: true });
    // Pending now: recover (failed only) leaves it alone.
    expect(await log.requeue(endpointId, [id], { onlyStatus: "failed" })).toEqual([]);
    const [claimed] = await log.claim([{ endpointId, limit: 5 }], 60_000);
    expect(claimed).toMatchObject({ deliveryId: id, run: 1, runAttempts: 0, attemptCount: 1, createdAt: stored.createdAt });
    expect(claimed!.body.toString()).toBe("{}");
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
    await log.record(ds.slice(0, 8).map((d) => application(d, 1, 30, "delivered", "delivered", 200)));
    await log.record([application(ds[8]!, 1, 3000, "retry", "pending", 503)]);
    await log.record([application(ds[8]!, 2, 3000, "retry", "failed", null)]);
    const extra = { id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") };
    await log.create([extra]);
    expect(await log.skip([extra.id, ds[0]!.id])).toBe(1); // a delivered one is not pending: left as it is

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
    // The rollup agrees with the states themselves.
    expect((await history.list(endpointId, { status: "skipped" }, { limit: 5 }))!.map((d) => d.id)).toEqual([extra.id]);
    expect((await history.list(endpointId, { status: "pending" }, { limit: 5 }))!.map((d) => d.id)).toEqual([ds[9]!.id]);

    // A disable skips every pending delivery of the endpoint; Replay of a skipped one moves it back.
    expect(await log.skipPendingOf(endpointId)).toBe(1);
    expect(await log.requeue(endpointId, [extra.id])).toEqual([extra.id]);
    expect((await history.stats(endpointId)).deliveries).toEqual({ total: 11, delivered: 8, failed: 1, pending: 1, skipped: 1 });
    // Replay of a delivered one: pending again, its attempts so far counted.
    expect(await log.requeue(endpointId, [ds[0]!.id])).toEqual([ds[0]!.id]);
    expect(await history.find(endpointId, ds[0]!.id)).toMatchObject({ status: "pending", attemptCount: 1, lastStatus: 200 });
    expect((await history.stats(endpointId)).deliveries).toEqual({ total: 11, delivered: 7, failed: 1, pending: 2, skipped: 1 });
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
      const r = application(d, 1, 40, p.verdict, p.verdict === "delivered" ? "delivered" : "pending", p.verdict === "delivered" ? 200 : 503);
      r.attempt.startedAt = new Date(now.getTime() - p.agoMs);
      await log.record([r]);
    }

    const stats = await history.stats([a.endpointId, b.endpointId], now);
    expect(stats.attempts).toEqual({ total: 6, succeeded: 3, failed: 3 });
    expect(stats.deliveries.total).toBe(8 - 1); // the deliveries are created now: all but the other endpoint's in the window
    expect(stats.deliveries).toMatchObject({ delivered: 4, pending: 3 });
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
    // One connection, so one rollup row per (endpoint, bucket): the deliveries' creation makes it
    // (an empty histogram), then each of the three statements below adds to it (ON CONFLICT).
    const onePool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
    const log = new DeliveryLog(pgRunner(onePool));
    const now = Date.now();
    // Durations on and around the histogram's bounds, two buckets, equal start times: the rollup is
    // checked against a plain computation of the same rows, not against the statements' own idea.
    const durations = [0, 4, 5, 6, 10, 24, 25, 49, 50, 99, 100, 2999, 3000, 29_999, 30_000, 45_000];
    const bounds = [5, 10, 25, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 15000, 30000];
    const results: AttemptApplication[] = [];
    try {
      for (let i = 0; i < 60; i += 1) {
        const { worldId, endpointId } = endpoints[i % 3]!;
        const d = { id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") };
        await log.create([d]);
        const verdict = (["delivered", "retry", "rejected"] as const)[i % 4 === 0 ? 1 : i % 7 === 0 ? 2 : 0]!;
        const r = application(d, 1 + (i % 3), durations[i % durations.length]!, verdict, verdict === "retry" ? "pending" : verdict === "delivered" ? "delivered" : "failed", verdict === "retry" ? 503 : 200);
        // A third start six minutes earlier (the previous bucket); pairs share a start time.
        r.attempt.startedAt = new Date(now - (i % 3 === 2 ? 6 * 60_000 : 0) - Math.floor(i / 6) * 1000);
        results.push(r);
      }
      // Later statements hold earlier starts: the row's last attempt must stay the latest one.
      for (let i = 0; i < results.length; i += 20) await log.record(results.slice(i, i + 20));
    } finally {
      await onePool.end();
    }

    const bucketOf = (t: Date) => Math.floor(t.getTime() / 300_000) * 300_000;
    type Roll = { attempts: number; succeeded: number; counts: number[]; max: number; last: AttemptApplication };
    const expected = new Map<string, Roll>();
    for (const r of results) {
      const key = `${r.endpointId} ${bucketOf(r.attempt.startedAt)}`;
      const roll = expected.get(key) ?? { attempts: 0, succeeded: 0, counts: Array<number>(21).fill(0), max: 0, last: r };
      roll.attempts += 1;
      if (r.attempt.verdict === "delivered") roll.succeeded += 1;
      roll.counts[bounds.filter((b) => b <= r.attempt.durationMs).length]! += 1;
      roll.max = Math.max(roll.max, r.attempt.durationMs);
      const later = (a: AttemptApplication, b: AttemptApplication) =>
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

describe("DeliveryLog.record (the group commit)", () => {
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
    // Both were claimed and sent; then the second endpoint was deleted (its deliveries with it).
    await prisma.webhookEndpoint.delete({ where: { id: gone.endpointId } });
    const failures = await log.record([application(keptDelivery, 1, 30, "rejected", "failed", 400), application(goneDelivery, 1, 30, "rejected", "failed", 400)]);

    expect(Object.fromEntries(failures)).toEqual({ [kept.endpointId]: 1 });
    const attempts = await pool.query<{ delivery_id: string }>("SELECT delivery_id FROM delivery_attempts WHERE delivery_id = ANY($1::uuid[])", [[keptDelivery.id, goneDelivery.id]]);
    expect(attempts.rows.map((r) => r.delivery_id)).toEqual([keptDelivery.id]);
    const deliveries = await pool.query<{ id: string }>("SELECT id FROM webhook_deliveries WHERE id = ANY($1::uuid[])", [[keptDelivery.id, goneDelivery.id]]);
    expect(deliveries.rows).toEqual([{ id: keptDelivery.id }]);
    const states = await statesOf([keptDelivery.id, goneDelivery.id]);
    expect([...states.values()].map((s) => [s.delivery_id, s.status])).toEqual([[keptDelivery.id, "failed"]]);
  });

  it("moves the endpoint's consecutive-failure count as the fate says: increments, a reset, and attempts that do not count", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const ds = Array.from({ length: 4 }, () => ({ id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") }));
    await log.create(ds);
    const failuresOf = async () => (await prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: endpointId } })).consecutiveFailures;
    expect(Object.fromEntries(await log.record([application(ds[0]!, 1, 5, "retry", "pending", 500), application(ds[1]!, 1, 5, "retry", "pending", 500)]))).toEqual({ [endpointId]: 2 });
    // A test delivery's failure does not count: the count stays, and the endpoint is not reported.
    expect(Object.fromEntries(await log.record([application(ds[2]!, 1, 5, "rejected", "failed", 400, { failures: "none" })]))).toEqual({});
    expect(await failuresOf()).toBe(2);
    // In one batch: a success resets, a failure after it counts from zero.
    expect(Object.fromEntries(await log.record([application(ds[3]!, 1, 5, "delivered", "delivered", 200), application(ds[0]!, 2, 5, "retry", "pending", 500)]))).toEqual({ [endpointId]: 1 });
    expect(await failuresOf()).toBe(1);
  });

  it("logs an attempt of an earlier run after a Replay, and leaves the delivery pending and due in its new run", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const history = new DeliveryHistory(pgRunner(pool));
    const ds = Array.from({ length: 3 }, () => ({ id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from('{"replayed":true}') }));
    await log.create(ds);
    // A drain claims all three in their first run; their attempts are in flight.
    const claimed = await log.claim([{ endpointId, limit: 10 }], 60_000);
    expect(claimed.map((c) => [c.deliveryId, c.run]).sort()).toEqual(ds.map((d) => [d.id, 0]).sort());
    // Meanwhile, Replay of the first two: pending in a new run, due at once, claimable again.
    const replayed = [ds[0]!.id, ds[1]!.id];
    expect((await log.requeue(endpointId, replayed)).sort()).toEqual([...replayed].sort());
    const before = await history.stats(endpointId);

    // The first run's attempts end: one delivered, one failed for good, the third (not replayed) failed too.
    await log.record([
      application(ds[0]!, 1, 20, "delivered", "delivered", 200, { run: 0 }),
      application(ds[1]!, 1, 20, "gone", "failed", 410, { run: 0 }),
      application(ds[2]!, 1, 20, "gone", "failed", 410, { run: 0 }),
    ]);

    // Every attempt is logged.
    for (const d of ds) expect((await history.get(endpointId, d.id))!.attempts.map((a) => a.attemptNumber)).toEqual([1]);
    // The replayed ones stay pending in run 1, due, with their bytes; the other one took its fate.
    const states = await statesOf(ds.map((d) => d.id));
    for (const id of replayed) expect(states.get(id)).toMatchObject({ status: "pending", run: 1, run_attempts: 0, due: true, claimed: false, has_body: true });
    expect(states.get(ds[2]!.id)).toMatchObject({ status: "failed", run: 0, run_attempts: 1 });
    expect((await history.list(endpointId, { status: "pending" }, { limit: 5 }))!.map((d) => d.id).sort()).toEqual([...replayed].sort());
    // The rollup moved only for the delivery whose state moved (the attempts all count).
    const after = await history.stats(endpointId);
    expect(after.deliveries).toEqual({ ...before.deliveries, pending: before.deliveries.pending - 1, failed: before.deliveries.failed + 1 });
    expect(after.attempts.total).toBe(before.attempts.total + 3);

    // The new run is claimed and its attempt applies.
    const again = await log.claim([{ endpointId, limit: 10 }], 60_000);
    expect(again.map((c) => [c.deliveryId, c.run]).sort()).toEqual(replayed.map((id) => [id, 1]).sort());
    expect(again[0]!.body.toString()).toBe('{"replayed":true}');
    await log.record(again.map((c) => application({ id: c.deliveryId, endpointId }, 2, 20, "delivered", "delivered", 200, { run: c.run })));
    expect([...(await statesOf(replayed)).keys()]).toEqual([]);
    expect((await history.stats(endpointId)).deliveries).toMatchObject({ pending: 0, delivered: 2, failed: 1 });
  });

  it("leaves a delivery skipped while its attempt was in flight skipped", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const d = { id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") };
    await log.create([d]);
    expect(await log.claim([{ endpointId, limit: 1 }], 60_000)).toHaveLength(1);
    expect(await log.skipPendingOf(endpointId)).toBe(1);
    await log.record([application(d, 1, 20, "retry", "pending", 503)]);
    expect((await statesOf([d.id])).get(d.id)).toMatchObject({ status: "skipped", run_attempts: 0, attempt_count: 1, has_body: false });
    expect((await new DeliveryHistory(pgRunner(pool)).get(endpointId, d.id))!.attempts).toHaveLength(1);
  });
});

describe("DeliveryLog.claim", () => {
  it("claims due deliveries oldest first for a lease, skips what another claim holds, and gives claims back", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    // Due one millisecond apart (their creation times), so "oldest first" is one order.
    const base = Date.now() - 1000;
    const ds = Array.from({ length: 5 }, (_, i) => ({ id: newDeliveryId(new Date(base + i)), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") }));
    await log.create(ds);
    const first = await log.claim([{ endpointId, limit: 2 }, { endpointId: randomUUID(), limit: 2 }], 60_000);
    // The two due first are taken (in no particular order within the claim).
    expect(first.map((c) => c.deliveryId).sort()).toEqual([ds[0]!.id, ds[1]!.id].sort());
    expect(first[0]).toMatchObject({ endpointId, run: 0, runAttempts: 0, attemptCount: 0, test: false, trace: null, endpoint: { url: "https://example.com/hook", enabled: true } });
    // A second drain (another replica, a lost job) gets the others only.
    const second = await log.claim([{ endpointId, limit: 10 }], 60_000);
    expect(second.map((c) => c.deliveryId).sort()).toEqual(ds.slice(2).map((d) => d.id).sort());
    expect(await log.claim([{ endpointId, limit: 10 }], 60_000)).toEqual([]);
    // A retry due later is not claimed until then.
    await log.record([application(ds[0]!, 1, 5, "retry", "pending", 503)]);
    const held = first.filter((c) => c.deliveryId === ds[1]!.id);
    await log.releaseClaims(held);
    const again = await log.claim([{ endpointId, limit: 10 }], 60_000);
    expect(again.map((c) => c.deliveryId)).toEqual([ds[1]!.id]);
    // The old lease is no longer this claim's: releasing or renewing with it changes nothing.
    await log.releaseClaims(held);
    expect(await log.claim([{ endpointId, limit: 10 }], 60_000)).toEqual([]);
    expect((await log.renewClaims(held, 60_000)).size).toBe(0);
    // Its holder renews it, and its lease moves on.
    const renewed = (await log.renewClaims(again, 120_000)).get(ds[1]!.id);
    expect(renewed?.claimedUntil.getTime()).toBeGreaterThan(again[0]!.claimedUntil.getTime());
    expect(renewed?.lease).not.toBe(again[0]!.lease);
    expect((await log.dueEndpoints()).find((e) => e.endpointId === endpointId)).toBeDefined();
  });

  it("takes a claim whose lease is over (a drain that died)", async () => {
    const { worldId, endpointId } = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const d = { id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from("{}") };
    await log.create([d]);
    expect(await log.claim([{ endpointId, limit: 1 }], 1)).toHaveLength(1);
    const taken = await eventually("the 1 ms lease is over", async () => {
      const claimed = await log.claim([{ endpointId, limit: 1 }], 60_000);
      return claimed.length > 0 && claimed;
    });
    expect(taken.map((c) => c.deliveryId)).toEqual([d.id]);
  });
});

describe("DeliveryLog intake and create", () => {
  it("makes a concurrent intake of the same event wait for the first one's commit, then find it known", async () => {
    const fixture = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    // The second intake runs on connections of its own, named, so the test can see them wait.
    const secondName = `intake-race-${randomUUID()}`;
    const secondPool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2, application_name: secondName });
    try {
      const event = { fixture, producerId: `race-${randomUUID()}`, type: "visitor.registered" };
      let second: Promise<StoredIntake> | undefined;
      let secondDone = false;
      const first = await intakeOf(log, [event], {
        after: async () => {
          // The first intake stored the event and its key; it has not committed yet.
          second = intakeOf(new DeliveryLog(pgRunner(secondPool)), [event]).finally(() => {
            secondDone = true;
          });
          await eventually("the second intake waits on a lock the first holds", async () => {
            const waiting = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [secondName]);
            return waiting.rows[0]!.n > 0;
          });
          expect(secondDone).toBe(false);
        },
      });
      const after = await second!;
      expect({ first: [first.fresh.length, first.created.length], second: [after.fresh.length, after.created.length] }).toEqual({ first: [1, 1], second: [0, 0] });
      const rows = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_events WHERE world_id = $1 AND producer_id = $2", [fixture.worldId, event.producerId]);
      expect(rows.rows[0]!.n).toBe(1);
    } finally {
      await secondPool.end();
    }
  });

  it("stores the event of an intake that waited for one that rolled back", async () => {
    const fixture = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const secondName = `intake-rollback-${randomUUID()}`;
    const secondPool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2, application_name: secondName });
    try {
      const event = { fixture, producerId: `rollback-${randomUUID()}`, type: "visitor.registered" };
      let second: Promise<StoredIntake> | undefined;
      const failed = intakeOf(log, [event], {
        after: async () => {
          second = intakeOf(new DeliveryLog(pgRunner(secondPool)), [event]);
          await eventually("the second intake waits on a lock the first holds", async () => {
            const waiting = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [secondName]);
            return waiting.rows[0]!.n > 0;
          });
          throw new Error("the member directory's step failed");
        },
      });
      await expect(failed).rejects.toThrow("the member directory's step failed");
      const stored = await second!;
      expect(stored.fresh.map((e) => e.producerId)).toEqual([event.producerId]);
      expect(stored.created).toHaveLength(1);
      const rows = await pool.query<{ events: number; deliveries: number }>(
        "SELECT (SELECT count(*) FROM webhook_events WHERE world_id = $1)::int AS events, (SELECT count(*) FROM webhook_deliveries WHERE world_id = $1)::int AS deliveries",
        [fixture.worldId],
      );
      expect(rows.rows[0]).toEqual({ events: 1, deliveries: 1 });
    } finally {
      await secondPool.end();
    }
  });

  it("reads the named worlds that exist with their enabled endpoints, and stores nothing of an intake whose later step fails", async () => {
    const fixture = await endpointFixture();
    const disabled = await prisma.webhookEndpoint.create({
      data: { worldId: fixture.worldId, url: "https://example.com/off", subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", enabled: false },
    });
    const bare = await prisma.world.create({ data: { organizationId: (await prisma.world.findUniqueOrThrow({ where: { id: fixture.worldId } })).organizationId, slug: "bare", name: "Bare", adminEmails: [] } });
    const log = new DeliveryLog(pgRunner(pool));
    const ref = (worldSlug: string, producerId: string) => ({ organizationSlug: fixture.organizationSlug, worldSlug, producerId });
    const failing = log.transaction(async (tx) => {
      const worlds = await log.resolveIntake([ref(fixture.worldSlug, "x"), ref("no-such-world", "y"), ref(fixture.worldSlug, "z"), ref("bare", "b")], tx);
      expect(worlds.map((w) => ({ id: w.id, world: `${w.organizationSlug}/${w.worldSlug}`, endpoints: w.endpoints })).sort((a, b) => a.world.localeCompare(b.world))).toEqual([
        { id: bare.id, world: `${fixture.organizationSlug}/bare`, endpoints: [] },
        { id: fixture.worldId, world: `${fixture.organizationSlug}/${fixture.worldSlug}`, endpoints: [{ id: fixture.endpointId, apiVersion: "2026-11-01", subscriptions: ["visitor", "recording"] }] },
      ]);
      expect(worlds.flatMap((w) => w.endpoints.map((e) => e.id))).not.toContain(disabled.id);
      const createdAt = new Date();
      const events = ["x", "z"].map((producerId): IntakeEvent => ({ rowId: newEventRowId(), worldId: fixture.worldId, producerId, type: "visitor.registered", occurredAt: createdAt.toISOString() }));
      const deliveries = events.map((e): NewDelivery => ({ id: newDeliveryId(createdAt), endpointId: fixture.endpointId, worldId: fixture.worldId, type: e.type, body: Buffer.from("{}"), event: { rowId: e.rowId, producerId: e.producerId } }));
      const stored = await log.storeIntake({ events, deliveries }, createdAt, tx);
      expect(stored.fresh.map((f) => f.producerId)).toEqual(["x", "z"]);
      // The member directory's step, failing after the events and deliveries were written.
      throw new Error("apply failed");
    });
    await expect(failing).rejects.toThrow("apply failed");
    const rows = await pool.query<{ events: number; keys: number; deliveries: number }>(
      `SELECT (SELECT count(*) FROM webhook_events WHERE world_id = $1)::int AS events, (SELECT count(*) FROM webhook_event_keys WHERE world_id = $1)::int AS keys,
              (SELECT count(*) FROM webhook_deliveries WHERE world_id = $1)::int AS deliveries`,
      [fixture.worldId],
    );
    expect(rows.rows[0]).toEqual({ events: 0, keys: 0, deliveries: 0 });
  });

  it("leaves out the deliveries of an endpoint deleted since the writer read it, instead of failing", async () => {
    const kept = await endpointFixture();
    const gone = await endpointFixture();
    const log = new DeliveryLog(pgRunner(pool));
    const events = [kept, gone].map((fixture) => ({ fixture, producerId: `gone-${randomUUID()}`, type: "visitor.registered" }));
    // The plan was made from endpoints read before; one of them is deleted meanwhile.
    const intake = await intakeOf(log, events, { meanwhile: () => prisma.webhookEndpoint.delete({ where: { id: gone.endpointId } }).then(() => undefined) });
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
    expect((await statesOf([other.id])).get(other.id)).toMatchObject({ status: "pending", due: true });
  });

  it("recordFinished stores a delivered one without a state and a failed one with its final state, and leaves out an endpoint deleted meanwhile", async () => {
    const kept = await endpointFixture();
    const gone = await endpointFixture();
    await prisma.webhookEndpoint.delete({ where: { id: gone.endpointId } });
    const finishedOf = ({ worldId, endpointId }: EndpointFixture, delivered: boolean) => {
      const delivery = { id: newDeliveryId(), endpointId, worldId, type: "member.connecting", body: Buffer.from("{}") };
      const attempt = application(delivery, 1, 12, delivered ? "delivered" : "rejected", delivered ? "delivered" : "failed", delivered ? 200 : 403).attempt;
      return { delivery, test: false, attempt, finishedAt: new Date() };
    };
    const finished = [finishedOf(kept, true), finishedOf(kept, false), finishedOf(gone, true)];
    await new DeliveryLog(pgRunner(pool)).recordFinished(finished);
    const ids = finished.map((f) => f.delivery.id);
    const deliveries = await pool.query<{ id: string }>("SELECT id FROM webhook_deliveries WHERE id = ANY($1::uuid[]) ORDER BY id", [ids]);
    expect(deliveries.rows).toEqual([{ id: ids[0] }, { id: ids[1] }]);
    const attempts = await pool.query<{ delivery_id: string }>("SELECT delivery_id FROM delivery_attempts WHERE delivery_id = ANY($1::uuid[]) ORDER BY delivery_id", [ids]);
    expect(attempts.rows).toEqual([{ delivery_id: ids[0] }, { delivery_id: ids[1] }]);
    const history = new DeliveryHistory(pgRunner(pool));
    expect(await history.find(kept.endpointId, ids[0]!)).toMatchObject({ status: "delivered", attemptCount: 1, lastStatus: 200 });
    expect(await history.find(kept.endpointId, ids[1]!)).toMatchObject({ status: "failed", attemptCount: 1, lastStatus: 403, nextAttemptAt: null });
    expect((await history.stats(kept.endpointId)).deliveries).toEqual({ total: 2, delivered: 1, failed: 1, pending: 0, skipped: 0 });
  });
});
