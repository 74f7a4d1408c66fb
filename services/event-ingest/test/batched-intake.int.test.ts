/**
 * Intakes in batches (group commit): requests that arrive while an intake's transaction runs are
 * stored together in the next one. Each request keeps its own answer: its counts, its own 404, and
 * a statement failure caused by one request's data fails that request only. The batches are formed
 * deterministically: the first request's transaction is held on its event's key (inserted into
 * webhook_event_keys here by a transaction left open, as a concurrent intake of the same id would),
 * and the next requests are submitted while it waits.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DeliveryLog, MemberDirectory, pgRunner, prismaRunner, type MemberEvent, type SqlRunner } from "@vw/db";
import type { DrainSignals } from "@vw/queues";
import { isDependencyUnavailable } from "@vw/service-kit";
import { eventually, parsePrometheusText, sampleSum } from "@vw/testing";
import { parseIntakeRequest } from "../src/events.schema.js";
import { IngestService } from "../src/ingest.service.js";
import { deliveriesWhere } from "./delivery-rows.js";
import { PLAY_URL, startIngest, type IngestHarness, type TestWorld } from "./harness.js";
import { makeEvent } from "./fixtures.js";

let api: IngestHarness;
let world: TestWorld;
const endpoints: string[] = [];

beforeAll(async () => {
  api = await startIngest();
  world = await api.createWorld();
  endpoints.push(await api.createEndpoint(world, { subscriptions: ["visitor", "consent"] }));
  endpoints.push(await api.createEndpoint(world, { subscriptions: ["visitor"] }));
});

afterAll(async () => {
  await api?.close();
});

/** An IngestService on the harness's pool and drain signals (unless given), recording its batch sizes; `members` may be wrapped. */
function service(
  members: Pick<MemberDirectory, "applyEvents"> = new MemberDirectory(prismaRunner(api.prisma)),
  options: { signals?: Pick<DrainSignals, "wake">; enqueueTimeoutMs?: number } = {},
) {
  const batches: number[] = [];
  const ingest = new IngestService(new DeliveryLog(pgRunner(api.pool)), options.signals ?? api.signals, members as MemberDirectory, {
    playUrl: PLAY_URL,
    enqueueTimeoutMs: options.enqueueTimeoutMs ?? 30_000,
    onBatch: (requests) => batches.push(requests),
  });
  return { ingest, batches };
}

/** A parsed request, as the route hands it over. */
function request(body: unknown) {
  const parsed = parseIntakeRequest(body, 500);
  if (!parsed.ok) throw new Error(`invalid test request: ${JSON.stringify(parsed.errors)}`);
  return parsed.value;
}

/**
 * Holds the key of `producerId` in `world` (an open transaction that inserted it), until `release`
 * rolls it back: the intake submitted first waits on it inside its transaction, then stores the
 * event as new, so what is submitted meanwhile forms the next batch.
 */
async function holdIntakeLock(producerId: string): Promise<{ release: () => Promise<void>; waiting: () => Promise<void> }> {
  const client = await api.pool.connect();
  await client.query("BEGIN");
  await client.query("INSERT INTO webhook_event_keys (world_id, producer_id, created_at) VALUES ($1::uuid, $2::text, now())", [world.id, producerId]);
  const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  const holder = rows[0]!.pid;
  return {
    async waiting() {
      await eventually(
        "the first intake waits for the held key",
        async () => {
          const { rows: blocked } = await api.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", [holder]);
          return (blocked[0]?.n ?? 0) > 0;
        },
        { timeoutMs: 20_000, intervalMs: 10 },
      );
    },
    async release() {
      try {
        await client.query("ROLLBACK");
      } finally {
        client.release();
      }
    },
  };
}

async function storedEvents(ids: readonly string[]): Promise<string[]> {
  const rows = await api.prisma.webhookEvent.findMany({ where: { worldId: world.id, producerId: { in: [...ids] } }, select: { producerId: true } });
  return rows.map((r) => r.producerId).sort();
}

/** Submits the blocker, then `requests` while it waits; resolves with every answer (settled). */
async function asOneBatch(ingest: IngestService, requests: readonly unknown[]) {
  const blocker = makeEvent(world);
  const lock = await holdIntakeLock(blocker.id);
  const first = ingest.ingest(request(blocker));
  await lock.waiting();
  const answers = Promise.allSettled(requests.map((body) => ingest.ingest(request(body))));
  await lock.release();
  expect(await first).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });
  return answers;
}

describe("intakes in batches", () => {
  it("stores the requests that arrive during an intake in one transaction, each answered with its own counts", async () => {
    const { ingest, batches } = service();
    const a = makeEvent(world);
    const b = makeEvent(world, "consent.changed");
    const c = makeEvent(world);
    const answers = await asOneBatch(ingest, [a, { events: [b, a] }, { events: [c, c] }]);
    expect(batches).toEqual([1, 3]);
    expect(answers.map((x) => (x.status === "fulfilled" ? x.value : x.reason))).toEqual([
      { accepted: 1, duplicates: 0, deliveries: 2 },
      // `a` was named first by the request before: a duplicate here, as if that one had committed first.
      { accepted: 1, duplicates: 1, deliveries: 1 },
      { accepted: 1, duplicates: 1, deliveries: 2 },
    ]);
    expect(await storedEvents([a.id, b.id, c.id])).toEqual([a.id, b.id, c.id].sort());
    const events = await api.prisma.webhookEvent.findMany({ where: { worldId: world.id, producerId: { in: [a.id, b.id, c.id] } }, select: { id: true } });
    const deliveries = await deliveriesWhere(api.prisma, { eventId: { in: events.map((e) => e.id) } });
    expect(deliveries).toHaveLength(5);
    for (const d of deliveries) expect(d.state).toMatchObject({ status: "pending", attemptCount: 0, claimedUntil: null });
    // Both endpoints got deliveries in the batch, and are woken.
    for (const endpointId of endpoints) expect((await api.drainJob(endpointId))?.data).toEqual({ endpointId });
  });

  it("answers a request naming an unknown world 404 without failing the others of its batch", async () => {
    const { ingest, batches } = service();
    const good = makeEvent(world);
    const withUnknown = makeEvent(world);
    const unknown = makeEvent(world, "visitor.registered", { world: `${world.organizationSlug}/no-such-world` });
    const answers = await asOneBatch(ingest, [{ events: [withUnknown, unknown] }, good]);
    expect(batches).toEqual([1, 2]);
    expect(answers[0]?.status).toBe("rejected");
    const problem = (answers[0] as PromiseRejectedResult).reason as { status: number; code: string; extras: { errors: unknown } };
    expect(problem.status).toBe(404);
    expect(problem.code).toBe("unknown-world");
    expect(problem.extras.errors).toEqual([{ pointer: "/events/1/world", detail: "names no known world" }]);
    expect(answers[1]).toEqual({ status: "fulfilled", value: { accepted: 1, duplicates: 0, deliveries: 2 } });
    // Nothing of the refused request is stored, not even its event of a known world.
    expect(await storedEvents([good.id, withUnknown.id])).toEqual([good.id]);
  });

  it("stores again one by one a batch whose statement fails on one request's data, so only that request fails", async () => {
    const real = new MemberDirectory(prismaRunner(api.prisma));
    const bad = makeEvent(world, "visitor.registered", { data: { uuid: "0c0ffee0-0000-4000-8000-000000000bad", name: "Bad", email: "bad@example.org", via: "email" } });
    let calls = 0;
    const members = {
      applyEvents(events: readonly MemberEvent[], tx?: SqlRunner) {
        calls += 1;
        if (events.some((e) => e.uuid === "0c0ffee0-0000-4000-8000-000000000bad")) {
          return Promise.reject(Object.assign(new Error("value too long for type character varying(320)"), { code: "22001" }));
        }
        return real.applyEvents(events, tx);
      },
    };
    const { ingest, batches } = service(members);
    const before = makeEvent(world);
    const after = makeEvent(world);
    const answers = await asOneBatch(ingest, [before, bad, after]);
    expect(batches).toEqual([1, 3]);
    expect(calls).toBe(1 + 1 + 3); // the blocker, the batch, then each request alone
    expect(answers[0]).toEqual({ status: "fulfilled", value: { accepted: 1, duplicates: 0, deliveries: 2 } });
    expect(answers[1]?.status).toBe("rejected");
    expect(((answers[1] as PromiseRejectedResult).reason as { code: string }).code).toBe("22001");
    expect(answers[2]).toEqual({ status: "fulfilled", value: { accepted: 1, duplicates: 0, deliveries: 2 } });
    expect(await storedEvents([before.id, bad.id, after.id])).toEqual([before.id, after.id].sort());
  });

  it("fails the whole batch at once when a dependency is unavailable, without retrying each request", async () => {
    const real = new MemberDirectory(prismaRunner(api.prisma));
    let calls = 0;
    let down = false;
    const members = {
      applyEvents(events: readonly MemberEvent[], tx?: SqlRunner) {
        calls += 1;
        if (down) return Promise.reject(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }));
        return real.applyEvents(events, tx);
      },
    };
    const { ingest } = service(members);
    const blocker = makeEvent(world);
    const lock = await holdIntakeLock(blocker.id);
    const first = ingest.ingest(request(blocker));
    await lock.waiting();
    down = true; // the blocker's own apply runs after the lock: it fails too, as a batch of one
    const answers = Promise.allSettled([makeEvent(world), makeEvent(world)].map((e) => ingest.ingest(request(e))));
    await lock.release();
    await expect(first).rejects.toMatchObject({ code: "57P01" });
    const settled = await answers;
    expect(settled.map((s) => s.status)).toEqual(["rejected", "rejected"]);
    expect(calls).toBe(2); // the blocker's batch and the batch of two: no request-by-request retry
  });
});

describe("a wake that fails after the batch's commit", () => {
  /** Drain signals whose first wake (the blocker's batch) goes through and whose later ones `fail`. */
  function failingAfterFirst(fail: (endpointIds: string[]) => Promise<number>) {
    const woken: string[][] = [];
    const signals = {
      wake(ids: Iterable<string>) {
        const list = [...ids];
        woken.push(list);
        return woken.length === 1 ? api.signals.wake(list) : fail(list);
      },
    };
    return { signals, woken };
  }

  /** An event of a world without endpoints: nothing to wake for it. */
  async function quietWorldEvent() {
    const quiet = await api.createWorld();
    return makeEvent(quiet);
  }

  it("fails the requests that have endpoints to wake (a dependency error: 503), answers the others, and keeps every delivery committed", async () => {
    const { signals, woken } = failingAfterFirst(() => Promise.reject(new Error("Connection is closed.")));
    const { ingest, batches } = service(undefined, { signals });
    const loud = makeEvent(world);
    const known = makeEvent(world);
    await api.post(known);
    const quiet = await quietWorldEvent();
    const answers = await asOneBatch(ingest, [loud, quiet, known]);
    expect(batches).toEqual([1, 3]);
    expect(woken[1]?.sort()).toEqual([...endpoints].sort());
    expect(answers[0]?.status).toBe("rejected");
    expect(isDependencyUnavailable((answers[0] as PromiseRejectedResult).reason)).toBe(true);
    expect(answers[1]).toEqual({ status: "fulfilled", value: { accepted: 1, duplicates: 0, deliveries: 0 } });
    // A duplicate wakes its endpoints too, so it fails with the wake: the producer retries it.
    expect(answers[2]?.status).toBe("rejected");
    // Committed before the wake: the retry finds them duplicates, and they are owed all the same.
    const stored = await api.prisma.webhookEvent.findFirstOrThrow({ where: { worldId: world.id, producerId: loud.id } });
    const deliveries = await deliveriesWhere(api.prisma, { eventId: stored.id });
    expect(deliveries.map((d) => d.status)).toEqual(["pending", "pending"]);
  });

  it("fails them with a timeout (503) when the wake does not settle within the enqueue timeout", async () => {
    const { signals } = failingAfterFirst(() => new Promise<number>(() => undefined));
    const { ingest } = service(undefined, { signals, enqueueTimeoutMs: 300 });
    const loud = makeEvent(world);
    const quiet = await quietWorldEvent();
    const answers = await asOneBatch(ingest, [loud, quiet]);
    expect(answers[0]?.status).toBe("rejected");
    const reason = (answers[0] as PromiseRejectedResult).reason as Error;
    expect(reason.name).toBe("TimeoutError");
    expect(isDependencyUnavailable(reason)).toBe(true);
    expect(answers[1]).toEqual({ status: "fulfilled", value: { accepted: 1, duplicates: 0, deliveries: 0 } });
    expect(await storedEvents([loud.id])).toEqual([loud.id]);
  });
});

describe("the batch metric", () => {
  it("counts every intake transaction and its requests in vw_ingest_batch_requests", async () => {
    const scrape = async () => parsePrometheusText(await (await fetch(`${api.baseUrl}/metrics`)).text());
    const before = await scrape();
    expect(before.types.get("vw_ingest_batch_requests")).toBe("histogram");
    expect((await api.post(makeEvent(world))).status).toBe(202);
    const after = await scrape();
    const delta = (name: string) => sampleSum(after, name, {}) - sampleSum(before, name, {});
    expect(delta("vw_ingest_batch_requests_count")).toBe(1);
    expect(delta("vw_ingest_batch_requests_sum")).toBe(1);
  });
});
