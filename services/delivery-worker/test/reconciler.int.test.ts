/**
 * PostgreSQL is the schedule of record and Redis a dispatch index: the reconciler rebuilds the
 * index when Redis loses the queue's data, queues again a due delivery that has no job, never
 * queues a run twice, and the worker trusts the row over the job (a job of an older run sends
 * nothing; one that runs before its row's due time waits).
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { UnrecoverableError, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { DeliveryLog, prismaRunner } from "@vw/db";
import { JOB_NAMES, deliverJobId, enqueueDeliveries, indexState, openDeliveryQueues, runsWithoutJob } from "@vw/queues";
import { deleteKeysUnder, eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

const RETRY_MS = 1500;
let h: Harness;
/** The index marker of every delivery shard. */
const indexStates = () => Promise.all(h.deliveries.shards.map((q) => indexState(h.redis, q)));
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  h = await startHarness({ retryDelays: [RETRY_MS], reconcile: { sweepIntervalMs: 1000, checkIntervalMs: 200 } });
  await eventually("the reconciler indexed the empty schedule", async () => (await indexStates()).every((s) => s === "indexed"));
});
afterAll(async () => {
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(answer: Parameters<typeof startWebhookReceiver>[0] extends infer O ? (O extends { answer?: infer A } ? A : never) : never = 200) {
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  return r;
}

/** Deletes every key of the harness's prefix, as a Redis restarted without its data would have none. */
async function loseRedisData(): Promise<number> {
  return deleteKeysUnder(h.redis, `${h.keyPrefix}:`);
}

const log = () => new DeliveryLog(prismaRunner(h.prisma));
const rowOf = (id: string) => h.prisma.webhookDelivery.findFirstOrThrow({ where: { id } });

describe("when Redis loses the queue's data", () => {
  it("queues every pending delivery again from PostgreSQL: due ones at once, retries at their time", async () => {
    const world = await h.createWorld();
    // The first attempt of each delivery fails: each then waits for its retry, in Redis only.
    const flaky = await receiver((req, res) => {
      res.statusCode = flaky.received.filter((r) => r.headers["webhook-id"] === req.headers["webhook-id"]).length === 1 ? 503 : 200;
      res.end();
    });
    const steady = await receiver(200);
    const retrying = await h.createEndpoint(world.id, { url: flaky.url });
    const unsent = await h.createEndpoint(world.id, { url: steady.url });
    const waitingForRetry = await Promise.all([0, 1, 2].map(() => h.seedDelivery(retrying)));
    await eventually("each of the three got its first (failed) attempt", async () => {
      const rows = await h.prisma.webhookDelivery.findMany({ where: { id: { in: waitingForRetry } } });
      return rows.every((r) => r.attemptCount === 1 && r.status === "pending" && r.nextAttemptAt !== null && r.nextAttemptAt.getTime() > Date.now());
    });
    // Stored, never queued: a producer killed between its commit and its enqueue.
    const neverQueued = await Promise.all([0, 1].map(() => h.seedDelivery(unsent, { enqueue: false })));

    expect(await loseRedisData()).toBeGreaterThan(0);

    await eventually("both never-queued deliveries arrived", () => neverQueued.every((id) => steady.received.some((r) => r.headers["webhook-id"] === id)));
    await eventually("the three retries were sent at their time and delivered", async () => {
      const rows = await h.prisma.webhookDelivery.findMany({ where: { id: { in: waitingForRetry } } });
      return rows.every((r) => r.status === "delivered");
    });
    for (const id of waitingForRetry) {
      const row = await rowOf(id);
      // Two attempts each: the index rebuilt the retry, it did not add one.
      expect({ id, attempts: row.attemptCount, received: flaky.received.filter((r) => r.headers["webhook-id"] === id).length }).toEqual({ id, attempts: 2, received: 2 });
      const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId: id }, orderBy: { attemptNumber: "asc" } });
      expect(attempts.map((a) => [a.trigger, a.responseStatus])).toEqual([
        ["initial", 503],
        ["retry", 200],
      ]);
      // Not before the row's due time: the second attempt came at least RETRY_MS after the first.
      expect(attempts[1]!.startedAt.getTime() - attempts[0]!.startedAt.getTime()).toBeGreaterThanOrEqual(RETRY_MS);
    }
    expect((await indexStates()).every((s) => s === "indexed")).toBe(true);
    const rebuilt = (await h.worker.metrics.reconciled.get()).values.find((v) => v.labels.reason === "rebuild");
    expect(rebuilt?.value).toBeGreaterThanOrEqual(5);
  });
});

describe("the sweep", () => {
  it("queues a due delivery that has no job, once", async () => {
    const world = await h.createWorld();
    const probe = await receiver(200);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint, { enqueue: false });
    await eventually("the delivery without a job arrived", () => probe.received.length === 1);
    expect(probe.received[0]!.headers["webhook-id"]).toBe(deliveryId);
    // The attempt is logged just after the receiver's answer.
    await eventually("its one attempt was logged as delivered", async () => {
      const row = await rowOf(deliveryId);
      return row.status === "delivered" && row.attemptCount === 1;
    });
  });

  it("sends a Replay whose process died before queueing it, under its new run, once", async () => {
    const world = await h.createWorld();
    const probe = await receiver(200);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect(await h.completion(deliveryId)).toBe("delivered");
    // Replay's first half (the row back to pending as run 1), and no job: the process died there.
    const [replay] = await log().requeue(endpoint.id, [deliveryId]);
    await eventually("the replayed run was sent", () => probe.received.length === 2);
    expect(await h.completion(deliverJobId({ deliveryId, run: replay!.run }))).toBe("delivered");
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
    expect(attempts.map((a) => a.trigger)).toEqual(["initial", "replay"]);
    expect(probe.received.map((r) => r.headers["webhook-id"])).toEqual([deliveryId, deliveryId]);
    expect(probe.received[1]!.body.equals(probe.received[0]!.body)).toBe(true);
  });

  it("leaves alone a run that has a job, and replaces a run whose job failed", async () => {
    const idleShards = openDeliveryQueues(h.redis, `${h.keyPrefix}-idle`, 1);
    const idle = idleShards.shards[0]!;
    try {
      const waiting = { deliveryId: "0193a000-0000-7000-8000-000000000001", endpointId: "0193a000-0000-7000-8000-0000000000e1", run: 0 };
      const failed = { deliveryId: "0193a000-0000-7000-8000-000000000002", endpointId: waiting.endpointId, run: 3 };
      const absent = { deliveryId: "0193a000-0000-7000-8000-000000000003", endpointId: waiting.endpointId, run: 0 };
      await enqueueDeliveries(idleShards, [{ ...waiting, delayMs: 3_600_000 }, failed]);
      // A job that ended in the failed set (its payload refused): the run has no live job.
      const connection = (h.redis as Redis).duplicate();
      const failing = new Worker(idle.name, () => Promise.reject(new UnrecoverableError("refused")), { connection, prefix: idle.opts.prefix! });
      await eventually("the job failed", async () => (await idle.getJobState(deliverJobId(failed))) === "failed");
      await failing.close();
      await connection.quit();
      expect(await runsWithoutJob(h.redis, idle, [waiting, failed, absent])).toEqual([false, true, true]);
      // The failed job was removed, so the run can be queued again under its id.
      expect(await idle.getJob(deliverJobId(failed))).toBeUndefined();
      await enqueueDeliveries(idleShards, [failed, waiting]);
      const jobs = await idle.getJobs(["waiting", "delayed", "failed"]);
      expect(jobs.map((j) => [j.id, j.name]).sort()).toEqual(
        [
          [deliverJobId(waiting), JOB_NAMES.deliver],
          [deliverJobId(failed), JOB_NAMES.deliver],
        ].sort(),
      );
    } finally {
      await idle.obliterate({ force: true });
      await idle.close();
    }
  });
});

describe("the row over the job", () => {
  it("a job of an earlier run sends nothing", async () => {
    const world = await h.createWorld();
    const probe = await receiver(200);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect(await h.completion(deliveryId)).toBe("delivered");
    const [replay] = await log().requeue(endpoint.id, [deliveryId]);
    expect(replay?.run).toBe(1);
    // Run 0's job again (a duplicate from before the Replay): stale. Then run 1's: sent.
    await h.enqueue([{ deliveryId, endpointId: endpoint.id, run: 0 }]);
    expect(await h.completion(deliveryId)).toBe("delivered");
    await h.deliveries.queueFor(endpoint.id).add(JOB_NAMES.deliver, { deliveryId, endpointId: endpoint.id, run: 0 }, { jobId: `${deliveryId}-dup` });
    expect(await h.completion(`${deliveryId}-dup`)).toBe("stale");
    await h.enqueue([{ deliveryId, endpointId: endpoint.id, run: 1 }]);
    expect(await h.completion(deliverJobId({ deliveryId, run: 1 }))).toBe("delivered");
    expect(probe.received).toHaveLength(2);
    expect((await rowOf(deliveryId)).run).toBe(1);
  });

  it("a job that runs before its row's due time waits for it, and nothing is spent", async () => {
    const world = await h.createWorld();
    const probe = await receiver(200);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint, { enqueue: false });
    const dueAt = new Date(Date.now() + 2500);
    // The row says later (as after a failed attempt); a job for it runs now anyway.
    await h.prisma.webhookDelivery.updateMany({ where: { id: deliveryId }, data: { nextAttemptAt: dueAt } });
    await h.deliveries.queueFor(endpoint.id).add(JOB_NAMES.deliver, { deliveryId, endpointId: endpoint.id, run: 0 }, { jobId: deliveryId });
    await eventually("the early job went back to the delayed set", async () => (await h.deliveries.queueFor(endpoint.id).getJobState(deliveryId)) === "delayed");
    expect(probe.received).toHaveLength(0);
    expect(await rowOf(deliveryId)).toMatchObject({ status: "pending", attemptCount: 0 });
    expect(await h.completion(deliveryId)).toBe("delivered");
    expect(probe.received).toHaveLength(1);
    const [attempt] = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId } });
    expect(attempt!.startedAt.getTime()).toBeGreaterThanOrEqual(dueAt.getTime() - 1000);
  });
});
