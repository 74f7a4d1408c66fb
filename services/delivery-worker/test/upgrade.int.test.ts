/**
 * Upgrading from one BullMQ job per delivery to endpoint drains (decision 0017, "Consequences"):
 * - a `deliver.v1` job of the earlier version, left in the deliveries queue (waiting, or delayed
 *   as a retry or a parked job was), is taken as a wake of its endpoint: the deliveries that the
 *   migration moved into `delivery_states` go out once each, the old job never sends anything by
 *   itself (a delivery already delivered is not sent again), and it leaves nothing in Redis;
 * - the first worker to start wakes, from PostgreSQL, every endpoint with pending deliveries
 *   although no producer woke them (the reconciler finds the new index markers missing).
 *
 * (Replaces legacy-layout.int.test.ts: the untagged key layout of the notifications and
 * recoveries queues is no longer read; the upgrade path that remains is this one.)
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Job } from "bullmq";
import { createPgPool, DeliveryLog, newDeliveryId, prismaRunner } from "@vw/db";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { buildEnvelope } from "@vw/webhook-core";
import { startDeliveryWorker } from "../src/compose.js";
import { silentLogger, startHarness, type Harness, type TestEndpoint } from "./harness.js";

/** The job name and payload of the earlier version (one job per delivery, its id the delivery's). */
const OLD_JOB_NAME = "deliver.v1";
const receivers: WebhookReceiver[] = [];

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver({ answer: 204 });
  receivers.push(r);
  return r;
}

/** Stores `n` pending deliveries of the endpoint, as the migration left them: no wake, no drain. */
async function migrated(h: Harness, endpoint: TestEndpoint, n: number): Promise<string[]> {
  const rows = Array.from({ length: n }, () => {
    const id = newDeliveryId();
    const body = buildEnvelope({
      deliveryId: id,
      apiVersion: "2026-11-01",
      type: "visitor.registered",
      timestamp: new Date().toISOString(),
      world: { slug: "lobby", url: "https://play.example.test/@/acme/lobby" },
      data: { uuid: id, name: "Ada", email: "ada@example.com", via: "sso" },
      test: false,
    });
    return { id, endpointId: endpoint.id, worldId: endpoint.worldId, type: "visitor.registered", body };
  });
  await new DeliveryLog(prismaRunner(h.prisma)).create(rows);
  return rows.map((r) => r.id);
}

/** Each delivery id and how many times it reached `r`. */
function copies(r: WebhookReceiver): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const d of r.received) counts[String(d.headers["webhook-id"])] = (counts[String(d.headers["webhook-id"])] ?? 0) + 1;
  return counts;
}

const once = (ids: readonly string[]): Record<string, number> => Object.fromEntries(ids.map((id) => [id, 1]));

describe("jobs of the earlier version left in the deliveries queue", () => {
  let h: Harness;
  beforeAll(async () => {
    // No reconciler: only the old jobs can wake these endpoints.
    h = await startHarness({ reconcile: null });
  });
  afterAll(async () => {
    await h.close();
  });

  it("wake their endpoints: the pending deliveries go out once each, and the old jobs leave nothing behind", async () => {
    const world = await h.createWorld();
    const [waitingTarget, delayedTarget, doneTarget] = [await receiver(), await receiver(), await receiver()];
    const waitingEndpoint = await h.createEndpoint(world.id, { url: waitingTarget.url });
    const delayedEndpoint = await h.createEndpoint(world.id, { url: delayedTarget.url });
    const doneEndpoint = await h.createEndpoint(world.id, { url: doneTarget.url });
    waitingTarget.setSecret(waitingEndpoint.secret);
    delayedTarget.setSecret(delayedEndpoint.secret);
    doneTarget.setSecret(doneEndpoint.secret);

    // Delivered before the upgrade (by this version, here): its old job must not send it again.
    const delivered = await h.seedDelivery(doneEndpoint);
    expect((await h.settled(doneEndpoint.id, delivered, ["delivered"])).status).toBe("delivered");
    await doneTarget.waitFor(1);

    const waitingIds = await migrated(h, waitingEndpoint, 3);
    const delayedIds = await migrated(h, delayedEndpoint, 2);
    const results = new Map<string, unknown>();
    const onCompleted = (job: Job, result: unknown): void => void (job.name === OLD_JOB_NAME && results.set(String(job.id), result));
    for (const w of h.worker.deliveries.workers) w.on("completed", onCompleted);
    const oldJobs: { id: string; endpointId: string }[] = [];
    try {
      // The earlier version's jobs, in the shard of their endpoint: one per delivery, waiting; a
      // retry or a parked job, delayed; and one for the delivery already delivered.
      const add = async (deliveryId: string, endpointId: string, delay = 0): Promise<void> => {
        await h.deliveries.queueFor(endpointId).add(OLD_JOB_NAME, { deliveryId, endpointId, run: 0 }, { jobId: deliveryId, delay });
        oldJobs.push({ id: deliveryId, endpointId });
      };
      for (const id of waitingIds) await add(id, waitingEndpoint.id);
      for (const id of delayedIds) await add(id, delayedEndpoint.id, 500);
      await add(delivered, doneEndpoint.id);

      await eventually("every pending delivery delivered", async () => (await h.prisma.deliveryState.count({ where: { deliveryId: { in: [...waitingIds, ...delayedIds] } } })) === 0, {
        timeoutMs: 30_000,
      });
      await eventually("every old job ran", () => results.size === oldJobs.length);
    } finally {
      for (const w of h.worker.deliveries.workers) w.off("completed", onCompleted);
    }
    // Each old job was a wake, nothing more.
    expect([...results.values()]).toEqual(oldJobs.map(() => "woken"));
    for (const job of oldJobs) expect(await h.deliveries.queueFor(job.endpointId).getJob(job.id)).toBeUndefined();
    const failed = await Promise.all(h.deliveries.shards.map((q) => q.getJobCountByTypes("failed")));
    expect(failed.reduce((a, b) => a + b, 0)).toBe(0);

    expect(copies(waitingTarget)).toEqual(once(waitingIds));
    expect(copies(delayedTarget)).toEqual(once(delayedIds));
    expect(copies(doneTarget)).toEqual(once([delivered]));
    for (const r of [waitingTarget, delayedTarget, doneTarget]) expect(r.received.every((d) => d.verifyError === null)).toBe(true);
  }, 60_000);
});

describe("the first worker of the new version", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ inProcessWorker: false });
  });
  afterAll(async () => {
    await h.close();
  });

  it("wakes every endpoint with pending deliveries in PostgreSQL, although nothing woke them", async () => {
    const world = await h.createWorld();
    const targets = [await receiver(), await receiver()];
    const endpoints = await Promise.all(targets.map((t) => h.createEndpoint(world.id, { url: t.url })));
    targets.forEach((t, i) => t.setSecret(endpoints[i]!.secret));
    // Moved into delivery_states by the migration; the queue holds nothing for them.
    const ids = [await migrated(h, endpoints[0]!, 3), await migrated(h, endpoints[1]!, 2)];

    const pool = createPgPool(h.databaseUrl, { max: 3 });
    const worker = await startDeliveryWorker({
      pool,
      connection: h.redis,
      keyPrefix: h.keyPrefix,
      logger: silentLogger,
      secretBox: h.secretBox,
      endpointUrlPolicy: "any",
      deliveryTimeoutMs: 2000,
      retryDelays: [100],
      disableAfterFailures: 50,
      deliveryConcurrency: 10,
      endpointConcurrency: 10,
      retentionDays: 36_500,
      partitionsAheadDays: 7,
      retentionIntervalMs: 3_600_000,
      jobLockMs: 30_000,
      mailTransport: null,
      mailFrom: "Webhooks <webhooks@test.local>",
      // A sweep far away: only the check of the missing markers can wake them within this test.
      reconcile: { sweepIntervalMs: 3_600_000, checkIntervalMs: 200 },
    });
    try {
      await eventually("every migrated delivery delivered", async () => (await h.prisma.deliveryState.count({ where: { deliveryId: { in: ids.flat() } } })) === 0, {
        timeoutMs: 30_000,
      });
      targets.forEach((t, i) => expect(copies(t)).toEqual(once(ids[i]!)));
      expect(await h.prisma.deliveryAttempt.count({ where: { endpointId: { in: endpoints.map((e) => e.id) } } })).toBe(5);
    } finally {
      await worker.close();
      await pool.end();
    }
  }, 60_000);
});
