/**
 * One drain per endpoint, whatever the number of workers and shards (decision 0017): the drain job
 * `d-<endpointId>` is the only sender of its endpoint, so the endpoint's window bounds its attempts
 * in flight across every replica; when two drains of one endpoint do run at once (two layouts of
 * QUEUE_SHARDS during a change), PostgreSQL's claims still send each delivery once; and a burst
 * of wakes to one endpoint costs one drain job, not one job per delivery.
 *
 * (Replaces the tests of the Redis endpoint scheduler, the shared job budget and the slot wait:
 * those mechanisms are gone; these are the guarantees they gave.)
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Job } from "bullmq";
import { createPgPool, type PgPool } from "@vw/db";
import { DrainSignals, drainJobId, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { eventually, metricValue, type WebhookReceiver } from "@vw/testing";
import { startDeliveryWorker, type DeliveryWorker } from "../src/compose.js";
import { InFlight, countingReceiver, silentLogger, startHarness, type Harness, type TestEndpoint } from "./harness.js";

const WINDOW = 3;
let h: Harness;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  // Drains that end as soon as they run out of work, so each wave below gets new drain jobs, which
  // either worker may take.
  h = await startHarness({ queueShards: 4, endpointConcurrency: WINDOW, drainLingerMs: 20, reconcile: null });
});
afterAll(async () => {
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

/** Another worker replica in this process: same database, Redis prefix and secrets; its own pool. */
async function startReplica(queueShards: number): Promise<{ worker: DeliveryWorker; close(): Promise<void> }> {
  const pool: PgPool = createPgPool(h.databaseUrl, { max: 3 });
  const worker = await startDeliveryWorker({
    pool,
    connection: h.redis,
    keyPrefix: h.keyPrefix,
    queueShards,
    logger: silentLogger,
    secretBox: h.secretBox,
    endpointUrlPolicy: "any",
    deliveryTimeoutMs: 2000,
    retryDelays: [100, 200, 300],
    disableAfterFailures: 50,
    deliveryConcurrency: 50,
    endpointConcurrency: WINDOW,
    drainLingerMs: 20,
    retentionDays: 36_500,
    partitionsAheadDays: 7,
    retentionIntervalMs: 3_600_000,
    jobLockMs: 30_000,
    mailTransport: null,
    mailFrom: "Webhooks <webhooks@test.local>",
    reconcile: null,
  });
  return {
    worker,
    async close() {
      await worker.close();
      await pool.end();
    },
  };
}

/** Stores `n` deliveries of the endpoint in one statement, without waking it; returns their ids. */
async function store(endpoint: TestEndpoint, n: number): Promise<string[]> {
  return h.storeDeliveries(endpoint, n);
}

/** How many times each delivery id reached `receiver`. */
function copies(receiver: WebhookReceiver): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of receiver.received) counts.set(String(r.headers["webhook-id"]), (counts.get(String(r.headers["webhook-id"])) ?? 0) + 1);
  return counts;
}

/** Waits until none of `ids` has a state left (each one delivered). */
async function allDelivered(ids: readonly string[], timeoutMs = 60_000): Promise<void> {
  await eventually(`all ${ids.length} deliveries delivered`, async () => (await h.prisma.deliveryState.count({ where: { deliveryId: { in: [...ids] } } })) === 0, {
    timeoutMs,
  });
}

const attemptsOf = (worker: DeliveryWorker): Promise<number> => metricValue(worker.metrics.attempts, { verdict: "delivered" });

describe("two workers of one layout", () => {
  it("never have more attempts of an endpoint in flight than its window together, and send each delivery once", async () => {
    const replica = await startReplica(4);
    try {
      const world = await h.createWorld();
      const targets: { endpoint: TestEndpoint; receiver: WebhookReceiver; count: InFlight }[] = [];
      for (let i = 0; i < 4; i += 1) {
        // Answers held long enough that a window's attempts overlap at the receiver.
        const { receiver, count } = await countingReceiver(100);
        receivers.push(receiver);
        const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
        receiver.setSecret(endpoint.secret);
        targets.push({ endpoint, receiver, count });
      }
      // Waves of work, each woken at once, until both workers have drained: each wave's drains
      // end with it (a short linger), so the next wave's drain jobs go to either worker.
      const ids: string[] = [];
      const before = await attemptsOf(h.worker);
      for (let wave = 0; wave < 2 || (await attemptsOf(h.worker)) === before || (await attemptsOf(replica.worker)) === 0; wave += 1) {
        if (wave >= 20) throw new Error("one worker never took a drain in 20 waves");
        const waveIds: string[] = [];
        // More than a drain claims at once (its window times CLAIM_ROUNDS), woken by several
        // producers together and again while the drains run: a second drain of an endpoint would
        // find deliveries of its own to send.
        for (const t of targets) waveIds.push(...(await store(t.endpoint, 60)));
        const wakeAll = () => h.wake(targets.map((t) => t.endpoint.id));
        await Promise.all([wakeAll(), wakeAll(), wakeAll()]);
        await eventually("every receiver is being sent to", () => targets.every((t) => t.count.now > 0 || t.receiver.received.length > 0));
        await Promise.all([wakeAll(), wakeAll()]);
        await allDelivered(waveIds);
        ids.push(...waveIds);
      }

      expect(targets.map((t) => t.count.most).filter((most) => most > WINDOW)).toEqual([]);
      for (const t of targets) expect(t.receiver.received.every((r) => r.verifyError === null)).toBe(true);
      // The bound is not vacuous: windows did fill.
      expect(Math.max(...targets.map((t) => t.count.most))).toBe(WINDOW);
      // Each delivery reached its receiver exactly once.
      const counts = new Map<string, number>();
      for (const t of targets) for (const [id, n] of copies(t.receiver)) counts.set(id, n);
      expect([...counts.keys()].sort()).toEqual([...ids].sort());
      expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
      expect((await attemptsOf(h.worker)) - before + (await attemptsOf(replica.worker))).toBe(ids.length);
    } finally {
      await replica.close();
    }
  }, 180_000);
});

describe("two layouts of QUEUE_SHARDS at once (a change being rolled out)", () => {
  let oneShard: DeliveryQueues;
  beforeAll(() => {
    oneShard = openDeliveryQueues(h.redis, h.keyPrefix, 1);
  });
  afterAll(async () => {
    await oneShard.close();
  });

  it("give an endpoint a drain in each layout, and PostgreSQL's claims still send each delivery once", async () => {
    // The harness's worker serves 4 shards; this replica, 1 (the new layout).
    const replica = await startReplica(1);
    const oneShardSignals = new DrainSignals(oneShard);
    try {
      const { receiver, count } = await countingReceiver(50);
      receivers.push(receiver);
      const world = await h.createWorld();
      const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
      receiver.setSecret(endpoint.secret);
      const ids: string[] = [];
      const before = await attemptsOf(h.worker);
      for (let wave = 0; wave < 1 || (await attemptsOf(h.worker)) === before || (await attemptsOf(replica.worker)) === 0; wave += 1) {
        if (wave >= 20) throw new Error("the endpoint never had a drain in both layouts in 20 waves");
        const waveIds = await store(endpoint, 40);
        // Producers of both versions wake the endpoint, each in its own layout: two drain jobs.
        await Promise.all([h.wake([endpoint.id]), oneShardSignals.wake([endpoint.id])]);
        await allDelivered(waveIds);
        ids.push(...waveIds);
      }
      const counts = copies(receiver);
      expect([...counts.keys()].sort()).toEqual([...ids].sort());
      expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
      expect(receiver.received.every((r) => r.verifyError === null)).toBe(true);
      // Two drains sent at once here (each within its own window), so the only bound is theirs together.
      expect(count.most).toBeLessThanOrEqual(2 * WINDOW);
      const attempts = await h.prisma.deliveryAttempt.count({ where: { endpointId: endpoint.id } });
      expect(attempts).toBe(ids.length);
    } finally {
      await replica.close();
    }
  }, 180_000);
});

describe("a burst of wakes to one endpoint", () => {
  it("is sent by one drain job, with its window full, not a job per delivery", async () => {
    const { receiver, count } = await countingReceiver(30);
    receivers.push(receiver);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
    receiver.setSecret(endpoint.secret);
    const started: string[] = [];
    const ended: { id: string; result: unknown }[] = [];
    const onActive = (job: Job): void => void (job.data?.endpointId === endpoint.id && started.push(String(job.id)));
    const onCompleted = (job: Job, result: unknown): void => void (job.data?.endpointId === endpoint.id && ended.push({ id: String(job.id), result }));
    for (const w of h.worker.deliveries.workers) {
      w.on("active", onActive);
      w.on("completed", onCompleted);
    }
    try {
      const ids = await store(endpoint, 40);
      // Each delivery woken on its own, as 40 producers' commits would: every wake after the first
      // finds the drain job and only flags the endpoint (or publishes to the running drain).
      await Promise.all(ids.map(() => h.wake([endpoint.id])));
      await allDelivered(ids);
      await eventually("the endpoint's drain ended", () => ended.length > 0 && started.length === ended.length);
      expect(started).toEqual([drainJobId(endpoint.id)]);
      expect(ended).toEqual([{ id: drainJobId(endpoint.id), result: "drained" }]);
      expect(count.most).toBe(WINDOW);
      expect(receiver.received).toHaveLength(40);
    } finally {
      for (const w of h.worker.deliveries.workers) {
        w.off("active", onActive);
        w.off("completed", onCompleted);
      }
    }
  }, 60_000);
});
