/**
 * Intakes in batches (group commit): requests that arrive while an intake's transaction runs are
 * stored together in the next one. Each request keeps its own answer: its counts, its own 404, and
 * a statement failure caused by one request's data fails that request only. The batches are formed
 * deterministically: the first request's transaction is held on the advisory lock of its event
 * (taken here, as a concurrent intake of the same id would), and the next requests are submitted
 * while it waits.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { MemberDirectory, prismaRunner, type MemberEvent, type SqlRunner } from "@vw/db";
import { eventually, parsePrometheusText, sampleSum } from "@vw/testing";
import { parseIntakeRequest } from "../src/events.schema.js";
import { IngestService } from "../src/ingest.service.js";
import { PLAY_URL, startIngest, type IngestHarness, type TestWorld } from "./harness.js";
import { makeEvent } from "./fixtures.js";

let api: IngestHarness;
let world: TestWorld;

beforeAll(async () => {
  api = await startIngest();
  world = await api.createWorld();
  await api.createEndpoint(world, { subscriptions: ["visitor", "consent"] });
  await api.createEndpoint(world, { subscriptions: ["visitor"] });
});

afterAll(async () => {
  await api?.close();
});

/** An IngestService on the harness's pool and queue, recording its batch sizes; `members` may be wrapped. */
function service(members: Pick<MemberDirectory, "applyEvents"> = new MemberDirectory(prismaRunner(api.prisma))) {
  const batches: number[] = [];
  const ingest = new IngestService(api.pool, api.queue, members as MemberDirectory, {
    playUrl: PLAY_URL,
    enqueueTimeoutMs: 5_000,
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
 * Holds the advisory lock an intake of `producerId` in `world` takes, until `release` is called:
 * the intake submitted first waits on it inside its transaction, so what is submitted meanwhile
 * forms the next batch.
 */
async function holdIntakeLock(producerId: string): Promise<{ release: () => Promise<void>; waiting: () => Promise<void> }> {
  const client = await api.pool.connect();
  await client.query("SELECT pg_advisory_lock(hashtextextended($1::text || ':' || $2, 0))", [world.id, producerId]);
  return {
    async waiting() {
      await eventually(
        "the first intake waits for the held lock",
        async () => {
          const { rows } = await api.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
          return (rows[0]?.n ?? 0) > 0;
        },
        { timeoutMs: 5000, intervalMs: 10 },
      );
    },
    async release() {
      try {
        await client.query("SELECT pg_advisory_unlock(hashtextextended($1::text || ':' || $2, 0))", [world.id, producerId]);
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
    const jobs = (await api.jobs()).filter((j) => j.data.run === 0);
    const events = await api.prisma.webhookEvent.findMany({ where: { worldId: world.id, producerId: { in: [a.id, b.id, c.id] } }, select: { id: true } });
    const deliveries = await api.prisma.webhookDelivery.findMany({ where: { eventId: { in: events.map((e) => e.id) } }, select: { id: true } });
    expect(deliveries).toHaveLength(5);
    for (const d of deliveries) expect(jobs.some((j) => j.data.deliveryId === d.id)).toBe(true);
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
