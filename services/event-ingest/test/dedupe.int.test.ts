/**
 * Deduplication on the producer's id: one (world, producer event id) is stored once, with its
 * deliveries, over the whole retention (its key in `webhook_event_keys`), also when intakes of the
 * same id run at the same time in separate processes; and a duplicate still wakes the endpoints its
 * event goes to, so a producer retrying after a 503 (deliveries committed, wake failed) gets them
 * sent without waiting for the worker's reconciler. A duplicate never changes a delivery's state.
 */
import { createServer, type AddressInfo, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createPgPool, DeliveryLog, MemberDirectory, pgRunner, prismaRunner, type IntakePlan, type PgPool, type SqlRunner } from "@vw/db";
import { DrainSignals, drainJobId, openDeliveryQueues } from "@vw/queues";
import { deleteKeysUnder, eventually, testKeyPrefix } from "@vw/testing";
import { parseIntakeRequest } from "../src/events.schema.js";
import { IngestService } from "../src/ingest.service.js";
import { deliveriesOfEvent } from "./delivery-rows.js";
import { PLAY_URL, startIngest, type IngestHarness, type TestWorld } from "./harness.js";
import { makeEvent } from "./fixtures.js";

let api: IngestHarness;
let world: TestWorld;
let otherWorld: TestWorld;
const ep: Record<"visitorConsent" | "visitor" | "other", string> = { visitorConsent: "", visitor: "", other: "" };

beforeAll(async () => {
  api = await startIngest();
  world = await api.createWorld();
  otherWorld = await api.createWorld();
  ep.visitorConsent = await api.createEndpoint(world, { subscriptions: ["visitor", "consent"] });
  ep.visitor = await api.createEndpoint(world, { subscriptions: ["visitor"] });
  ep.other = await api.createEndpoint(otherWorld, { subscriptions: ["visitor"] });
});

afterAll(async () => {
  await api?.close();
});

const deliveriesOf = (producerId: string, worldId = world.id) => deliveriesOfEvent(api.prisma, worldId, producerId);

/** A world of its own with two endpoints subscribed to `visitor` (no drain job of another test in the way). */
async function freshWorld() {
  const w = await api.createWorld();
  const endpoints = [await api.createEndpoint(w, { subscriptions: ["visitor"] }), await api.createEndpoint(w, { subscriptions: ["visitor", "consent"] })];
  return { world: w, endpoints };
}

/** A parsed request, as the route hands it over. */
function request(body: unknown) {
  const parsed = parseIntakeRequest(body, 500);
  if (!parsed.ok) throw new Error(`invalid test request: ${JSON.stringify(parsed.errors)}`);
  return parsed.value;
}

describe("deduplication on the producer's id", () => {
  it("counts the same id sent again as a duplicate and creates nothing", async () => {
    const event = makeEvent(world);
    expect((await api.post(event)).body).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });
    const before = await deliveriesOf(event.id);
    expect(before).toHaveLength(2);
    const jobsBefore = (await api.jobs()).map((j) => j.id).sort();

    // A retry may differ in content: the id alone decides.
    const again = await api.post({ ...event, timestamp: "2027-01-01T00:00:00Z" });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    expect(await api.prisma.webhookEvent.count({ where: { worldId: world.id, producerId: event.id } })).toBe(1);
    expect(await api.prisma.webhookEventKey.count({ where: { worldId: world.id, producerId: event.id } })).toBe(1);
    expect(await deliveriesOf(event.id)).toEqual(before);
    // The endpoints' drain jobs were there already: the duplicate's wake adds none.
    expect((await api.jobs()).map((j) => j.id).sort()).toEqual(jobsBefore);
  });

  it("counts an id repeated within one batch once, and the repeat as a duplicate", async () => {
    const event = makeEvent(world);
    const other = makeEvent(world, "consent.changed");
    const res = await api.post({ events: [event, other, { ...event, type: "consent.changed", data: other.data }] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 1, deliveries: 3 });
    const stored = await api.prisma.webhookEvent.findFirstOrThrow({ where: { worldId: world.id, producerId: event.id } });
    expect(stored.type).toBe("visitor.registered");
    expect(await deliveriesOf(event.id)).toHaveLength(2);
  });

  it("mixes new and known events in one batch", async () => {
    const known = makeEvent(world);
    await api.post(known);
    const res = await api.post({ events: [known, makeEvent(world), makeEvent(world, "consent.changed")] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 1, deliveries: 3 });
  });

  it("scopes ids to their world: the same id in two worlds is two events", async () => {
    const id = `shared-${Date.now()}`;
    const res = await api.post({ events: [makeEvent(world, "visitor.registered", { id }), makeEvent(otherWorld, "visitor.registered", { id })] });
    expect(res.body).toEqual({ accepted: 2, duplicates: 0, deliveries: 3 });
    expect((await deliveriesOf(id)).map((d) => d.endpointId).sort()).toEqual([ep.visitorConsent, ep.visitor].sort());
    expect((await deliveriesOf(id, otherWorld.id)).map((d) => d.endpointId)).toEqual([ep.other]);
  });

  it("stores an event once when requests to one process race with the same id", async () => {
    const event = makeEvent(world);
    const answers = await Promise.all([api.post(event), api.post(event), api.post({ events: [event] })]);
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202]);
    expect(answers.reduce((n, a) => n + a.body.accepted, 0)).toBe(1);
    expect(answers.reduce((n, a) => n + a.body.duplicates, 0)).toBe(2);
    const deliveries = await deliveriesOf(event.id);
    expect(deliveries).toHaveLength(2);
    expect(deliveries.map((d) => d.status)).toEqual(["pending", "pending"]);
  });
});

/**
 * Intakes in separate processes (each its own IngestService, pool and batches), so their
 * transactions really overlap in PostgreSQL.
 */
describe("concurrent intakes of one id in separate processes", () => {
  const pools: PgPool[] = [];
  afterAll(async () => {
    await Promise.all(pools.splice(0).map((p) => p.end()));
  });

  /** An IngestService on a pool of its own, waking endpoints through `signals` (the harness's queue unless given). */
  function ingestProcess(options: { hold?: (tx: SqlRunner) => Promise<void>; signals?: DrainSignals } = {}) {
    const pool = createPgPool(process.env.DATABASE_URL as string, { max: 2 });
    pools.push(pool);
    const log = new DeliveryLog(pgRunner(pool));
    if (options.hold) {
      // Holds the transaction once the events' keys are inserted, before it commits.
      const hold = options.hold;
      const storeIntake = log.storeIntake.bind(log);
      log.storeIntake = async (plan: IntakePlan, createdAt: Date, tx: SqlRunner) => {
        const stored = await storeIntake(plan, createdAt, tx);
        await hold(tx);
        return stored;
      };
    }
    return new IngestService(log, options.signals ?? api.signals, new MemberDirectory(prismaRunner(api.prisma)), { playUrl: PLAY_URL, enqueueTimeoutMs: 30_000 });
  }

  /**
   * A process whose intake stops inside its transaction, keys inserted, until `release` (commit)
   * or `abort` (the transaction fails and rolls back); `held` resolves with its backend's pid.
   */
  function heldProcess() {
    let release!: () => void;
    let abort!: (err: Error) => void;
    const gate = new Promise<void>((resolve, reject) => {
      release = resolve;
      abort = reject;
    });
    let reportPid!: (pid: number) => void;
    const held = new Promise<number>((resolve) => (reportPid = resolve));
    const ingest = ingestProcess({
      async hold(tx) {
        const [row] = await tx.query<{ pid: number }>({ name: "test-backend-pid", text: "SELECT pg_backend_pid() AS pid" }, []);
        reportPid(row!.pid);
        await gate;
      },
    });
    return { ingest, held, release, abort };
  }

  /** Waits until some backend waits for `holderPid`'s transaction (an intake of the same id, on its key). */
  async function blockedBy(holderPid: number) {
    await eventually(
      "the second intake waits for the first one's key",
      async () => {
        const { rows } = await api.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", [holderPid]);
        return (rows[0]?.n ?? 0) > 0;
      },
      { timeoutMs: 20_000, intervalMs: 10 },
    );
  }

  it("makes the second intake wait for the first's commit, then count a duplicate; both wake the endpoints", async () => {
    const { world: w, endpoints } = await freshWorld();
    const event = makeEvent(w);
    const first = heldProcess();
    // The second process wakes through a queue of its own: its wake is seen apart from the first's.
    const otherPrefix = testKeyPrefix("ingest-second-");
    const otherQueue = openDeliveryQueues(api.redis, otherPrefix);
    try {
      const second = ingestProcess({ signals: new DrainSignals(otherQueue) });
      const firstAnswer = first.ingest.ingest(request(event));
      const holder = await first.held;
      const secondAnswer = second.ingest(request(event));
      await blockedBy(holder);
      first.release();
      expect(await firstAnswer).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });
      expect(await secondAnswer).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });

      expect(await api.prisma.webhookEvent.count({ where: { worldId: w.id, producerId: event.id } })).toBe(1);
      const deliveries = await deliveriesOfEvent(api.prisma, w.id, event.id);
      expect(deliveries.map((d) => d.endpointId).sort()).toEqual([...endpoints].sort());
      expect(deliveries.map((d) => d.status)).toEqual(["pending", "pending"]);
      // Each intake woke both endpoints: the first by its new deliveries, the second by its duplicate.
      for (const endpointId of endpoints) {
        expect(await (await api.drainJob(endpointId))?.getState()).toBe("waiting");
        expect((await otherQueue.queueFor(endpointId).getJob(drainJobId(endpointId)))?.data).toEqual({ endpointId });
      }
    } finally {
      first.release();
      await otherQueue.obliterate({ force: true });
      await deleteKeysUnder(api.redis, `${otherPrefix}:`);
      await otherQueue.close();
    }
  });

  it("lets the waiting intake store the event when the first one rolls back", async () => {
    const { world: w, endpoints } = await freshWorld();
    const event = makeEvent(w);
    const first = heldProcess();
    const second = ingestProcess();
    const firstAnswer = first.ingest.ingest(request(event));
    const holder = await first.held;
    const secondAnswer = second.ingest(request(event));
    await blockedBy(holder);
    first.abort(Object.assign(new Error("the first intake fails after inserting its key"), { code: "XX000" }));
    await expect(firstAnswer).rejects.toThrow("the first intake fails");
    expect(await secondAnswer).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });

    expect(await api.prisma.webhookEvent.count({ where: { worldId: w.id, producerId: event.id } })).toBe(1);
    expect(await api.prisma.webhookEventKey.count({ where: { worldId: w.id, producerId: event.id } })).toBe(1);
    const deliveries = await deliveriesOfEvent(api.prisma, w.id, event.id);
    expect(deliveries.map((d) => d.endpointId).sort()).toEqual([...endpoints].sort());
    expect(deliveries.map((d) => d.status)).toEqual(["pending", "pending"]);
    for (const endpointId of endpoints) expect(await api.drainJob(endpointId)).toBeDefined();
  });

  it("accepts each event once when four processes store batches sharing ids in opposite orders", async () => {
    const { world: w } = await freshWorld();
    const events = Array.from({ length: 200 }, () => makeEvent(w));
    const reversed = [...events].reverse();
    const answers = await Promise.all([events, reversed, events, reversed].map((batch) => ingestProcess().ingest(request({ events: batch }))));
    expect(answers.reduce((n, a) => n + a.accepted, 0)).toBe(200);
    expect(answers.reduce((n, a) => n + a.duplicates, 0)).toBe(600);
    expect(answers.reduce((n, a) => n + a.deliveries, 0)).toBe(400);
    expect(await api.prisma.webhookEvent.count({ where: { worldId: w.id } })).toBe(200);
    expect(await api.prisma.webhookDelivery.count({ where: { worldId: w.id } })).toBe(400);
    const deliveryIds = (await api.prisma.webhookDelivery.findMany({ where: { worldId: w.id }, select: { id: true } })).map((d) => d.id);
    expect(await api.prisma.deliveryState.count({ where: { deliveryId: { in: deliveryIds }, status: "pending" } })).toBe(400);
  });
});

describe("a duplicate wakes its event's endpoints", () => {
  it("adds back a drain job lost after the commit", async () => {
    const { world: w, endpoints } = await freshWorld();
    const event = makeEvent(w);
    expect((await api.post(event)).body).toEqual({ accepted: 1, duplicates: 0, deliveries: 2 });
    const before = await deliveriesOfEvent(api.prisma, w.id, event.id);
    // Redis lost the jobs (the deliveries are owed all the same: they are in PostgreSQL).
    for (const endpointId of endpoints) await (await api.drainJob(endpointId))!.remove();
    for (const endpointId of endpoints) expect(await api.drainJob(endpointId)).toBeUndefined();

    const retry = await api.post(event);
    expect(retry.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    for (const endpointId of endpoints) {
      const job = await api.drainJob(endpointId);
      expect(job?.data).toEqual({ endpointId });
      expect(await job?.getState()).toBe("waiting");
    }
    // Only woken: the deliveries are the same, in the same state.
    expect(await deliveriesOfEvent(api.prisma, w.id, event.id)).toEqual(before);
  });

  it("publishes the wake to an endpoint whose drain job exists, and flags its new work", async () => {
    const { world: w, endpoints } = await freshWorld();
    const event = makeEvent(w);
    await api.post(event);
    for (const endpointId of endpoints) await api.signals.takeFlag(endpointId);
    const wakes = await api.listenForWakes();
    const handles = endpoints.map((id) => wakes.register(id));
    try {
      const jobIds = (await api.jobs()).map((j) => j.id).sort();
      expect((await api.post(event)).body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
      for (const handle of handles) expect(await handle.wait(20_000)).toBe(true);
      for (const endpointId of endpoints) expect(await api.signals.takeFlag(endpointId)).toBe(true);
      expect((await api.jobs()).map((j) => j.id).sort()).toEqual(jobIds);
    } finally {
      for (const handle of handles) handle.release();
    }
  });

  it("leaves failed, delivered and later-due deliveries as they are", async () => {
    const { world: w } = await freshWorld();
    const event = makeEvent(w);
    const later = makeEvent(w);
    await api.post({ events: [event, later] });
    const [failed, delivered] = await deliveriesOfEvent(api.prisma, w.id, event.id);
    const laterDue = new Date(Date.now() + 3_600_000);
    // As the worker would have left them: one failed for good, one delivered (no state), the later event's retried in an hour.
    await api.prisma.deliveryState.update({ where: { deliveryId: failed!.id }, data: { status: "failed", dueAt: null, body: null, attemptCount: 1, runAttempts: 1, lastStatus: 500 } });
    await api.prisma.deliveryState.delete({ where: { deliveryId: delivered!.id } });
    const laterIds = (await deliveriesOfEvent(api.prisma, w.id, later.id)).map((d) => d.id);
    await api.prisma.deliveryState.updateMany({ where: { deliveryId: { in: laterIds } }, data: { dueAt: laterDue, attemptCount: 1, runAttempts: 1, lastStatus: 503 } });
    const before = [...(await deliveriesOfEvent(api.prisma, w.id, event.id)), ...(await deliveriesOfEvent(api.prisma, w.id, later.id))];
    expect(before.map((d) => d.status)).toEqual(["failed", "delivered", "pending", "pending"]);

    expect((await api.post({ events: [event, later] })).body).toEqual({ accepted: 0, duplicates: 2, deliveries: 0 });
    const after = [...(await deliveriesOfEvent(api.prisma, w.id, event.id)), ...(await deliveriesOfEvent(api.prisma, w.id, later.id))];
    expect(after).toEqual(before);
    expect(after.slice(2).map((d) => d.state?.dueAt)).toEqual([laterDue, laterDue]);
  });
});

describe("a wake that fails after the commit", () => {
  it("answers 503 when Redis refuses the wake, keeps the deliveries due, and the producer's retry wakes them", async () => {
    const { world: w, endpoints } = await freshWorld();
    const down = await startIngest({ keyPrefix: api.keyPrefix });
    const event = makeEvent(w);
    try {
      await down.queue.waitUntilReady();
      down.redis.disconnect();
      await new Promise<void>((resolve) => down.redis.once("end", () => resolve()));
      const res = await down.post(event);
      expect(res.status).toBe(503);
      expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(res.headers.get("retry-after")).toBe("2");
      expect(res.body).toMatchObject({ type: "/problems/dependency-unavailable", status: 503 });
      expect(res.body.errorId).toEqual(expect.any(String));
    } finally {
      await down.close();
    }
    // Committed before the wake: owed, pending and due now, though no endpoint was woken.
    const stored = await deliveriesOfEvent(api.prisma, w.id, event.id);
    expect(stored.map((d) => d.endpointId).sort()).toEqual([...endpoints].sort());
    for (const d of stored) {
      expect(d.status).toBe("pending");
      expect(d.attemptCount).toBe(0);
      expect(d.state!.dueAt!.getTime()).toBeLessThanOrEqual(Date.now());
    }
    for (const endpointId of endpoints) expect(await api.drainJob(endpointId)).toBeUndefined();

    const retry = await api.post(event);
    expect(retry.status).toBe(202);
    expect(retry.body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    for (const endpointId of endpoints) expect(await (await api.drainJob(endpointId))?.getState()).toBe("waiting");
    expect(await deliveriesOfEvent(api.prisma, w.id, event.id)).toEqual(stored);
  });

  it("answers 503 when Redis does not answer within the enqueue timeout", async () => {
    const { world: w, endpoints } = await freshWorld();
    // A server that accepts connections and never answers: the wake waits for Redis to be ready.
    const sockets = new Set<Socket>();
    const blackHole = createServer((socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => blackHole.listen(0, "127.0.0.1", resolve));
    const port = (blackHole.address() as AddressInfo).port;
    const silent = await startIngest({ keyPrefix: api.keyPrefix, redisUrl: `redis://127.0.0.1:${port}`, enqueueTimeoutMs: 300 });
    const event = makeEvent(w);
    try {
      const res = await silent.post(event);
      expect(res.status).toBe(503);
      expect(res.body.type).toBe("/problems/dependency-unavailable");
      const ready = await silent.request("GET", "/readyz", { token: null });
      expect(ready.status).toBe(503);
    } finally {
      await silent.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => blackHole.close(resolve));
    }
    const stored = await deliveriesOfEvent(api.prisma, w.id, event.id);
    expect(stored.map((d) => d.status)).toEqual(["pending", "pending"]);
    for (const endpointId of endpoints) expect(await api.drainJob(endpointId)).toBeUndefined();
    expect((await api.post(event)).body).toEqual({ accepted: 0, duplicates: 1, deliveries: 0 });
    for (const endpointId of endpoints) expect(await api.drainJob(endpointId)).toBeDefined();
  });
});
