/**
 * Upgrading from one BullMQ job per delivery to endpoint drains (decision 0017, "Consequences";
 * the delivery-worker README, "Upgrading from one job per delivery"): nothing pending is lost.
 * - The one-time `upgrade-queues` command (dist/upgrade.js) removes the earlier version's
 *   `deliver.v1` jobs left in the deliveries queue (waiting, or delayed as a retry or a parked job
 *   was) and the shards' index markers; the first worker of the new version then sends every
 *   delivery the migration moved into `delivery_states` once, and none already delivered.
 * - The first worker of the new version wakes, from PostgreSQL, every endpoint with pending
 *   deliveries although no producer woke them (the reconciler finds the index markers missing).
 * - A worker that meets a job of the earlier version anyway (the step skipped) sends nothing for
 *   it and fails it for good (no retries): the delivery path holds only today's layout.
 *
 * (Replaces legacy-layout.int.test.ts: the untagged key layout of the notifications and
 * recoveries queues is no longer read.)
 */
import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Job } from "bullmq";
import { createPgPool } from "@vw/db";
import { indexMarkerKey } from "@vw/queues";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startDeliveryWorker, type DeliveryWorker } from "../src/compose.js";
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
  return h.storeDeliveries(endpoint, n);
}

/** Each delivery id and how many times it reached `r`. */
function copies(r: WebhookReceiver): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const d of r.received) counts[String(d.headers["webhook-id"])] = (counts[String(d.headers["webhook-id"])] ?? 0) + 1;
  return counts;
}

const once = (ids: readonly string[]): Record<string, number> => Object.fromEntries(ids.map((id) => [id, 1]));

/** Adds a job of the earlier version (one per delivery, its id the delivery's) to the endpoint's shard. */
async function addOldJob(h: Harness, deliveryId: string, endpointId: string, delay = 0): Promise<void> {
  await h.deliveries.queueFor(endpointId).add(OLD_JOB_NAME, { deliveryId, endpointId, run: 0 }, { jobId: deliveryId, delay });
}

const upgradeScript = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "upgrade.js");

/** Runs the operator's `upgrade-queues` step with the worker's environment; its exit code and output. */
function runUpgrade(h: Harness): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [upgradeScript], { env: { ...process.env, ...h.processEnv() }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The first worker of the new version, its reconciler checking the markers often and sweeping seldom. */
async function startNewWorker(h: Harness): Promise<{ worker: DeliveryWorker; close(): Promise<void> }> {
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
    // A sweep far away: only the check of the missing markers can wake them within these tests.
    reconcile: { sweepIntervalMs: 3_600_000, checkIntervalMs: 200 },
  });
  return {
    worker,
    async close() {
      await worker.close();
      await pool.end();
    },
  };
}

describe("the upgrade-queues step, then the first worker of the new version", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ inProcessWorker: false });
  });
  afterAll(async () => {
    await h.close();
  });

  it("removes the earlier jobs and markers; every pending delivery then goes out once, none delivered goes again", async () => {
    const world = await h.createWorld();
    const [waitingTarget, delayedTarget, doneTarget] = [await receiver(), await receiver(), await receiver()];
    const waitingEndpoint = await h.createEndpoint(world.id, { url: waitingTarget.url });
    const delayedEndpoint = await h.createEndpoint(world.id, { url: delayedTarget.url });
    const doneEndpoint = await h.createEndpoint(world.id, { url: doneTarget.url });
    waitingTarget.setSecret(waitingEndpoint.secret);
    delayedTarget.setSecret(delayedEndpoint.secret);
    doneTarget.setSecret(doneEndpoint.secret);

    // As the migration left them: pending deliveries in delivery_states, and one delivered before
    // the upgrade (no state: delivered), whose old job must not send it again.
    const waitingIds = await migrated(h, waitingEndpoint, 3);
    const delayedIds = await migrated(h, delayedEndpoint, 2);
    const [delivered] = await migrated(h, doneEndpoint, 1);
    await h.prisma.deliveryState.delete({ where: { deliveryId: delivered! } });

    // The earlier version's jobs, in the shard of their endpoint: one per delivery, waiting; a
    // retry or a parked job, delayed (an hour: only the step removes it); one for the delivered one.
    const oldJobs: { id: string; endpointId: string }[] = [];
    for (const id of waitingIds) oldJobs.push({ id, endpointId: waitingEndpoint.id });
    for (const id of delayedIds) oldJobs.push({ id, endpointId: delayedEndpoint.id });
    oldJobs.push({ id: delivered!, endpointId: doneEndpoint.id });
    for (const job of oldJobs) await addOldJob(h, job.id, job.endpointId, job.endpointId === delayedEndpoint.id ? 3_600_000 : 0);
    // The earlier version kept index markers too: were they left, no first check would wake anyone.
    for (const q of h.deliveries.shards) await h.redis.set(indexMarkerKey(q), "indexed:earlier");

    const run = await runUpgrade(h);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
    const report = run.stdout.split("\n").filter((l) => l.includes("jobs of the earlier version removed")).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(report).toHaveLength(1);
    expect(report[0]).toMatchObject({ removed: oldJobs.length, locked: 0, markersCleared: h.deliveries.count });
    for (const job of oldJobs) expect(await h.deliveries.queueFor(job.endpointId).getJob(job.id)).toBeUndefined();
    for (const q of h.deliveries.shards) expect(await h.redis.get(indexMarkerKey(q))).toBeNull();
    // Run again (an operator unsure whether it ran): nothing left to remove, nothing lost.
    const again = await runUpgrade(h);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('"removed":0');

    const replica = await startNewWorker(h);
    try {
      await eventually("every pending delivery delivered", async () => (await h.prisma.deliveryState.count({ where: { deliveryId: { in: [...waitingIds, ...delayedIds] } } })) === 0, {
        timeoutMs: 30_000,
      });
      await waitingTarget.waitFor(waitingIds.length);
      await delayedTarget.waitFor(delayedIds.length);
    } finally {
      await replica.close();
    }
    const failed = await Promise.all(h.deliveries.shards.map((q) => q.getJobCountByTypes("failed")));
    expect(failed.reduce((a, b) => a + b, 0)).toBe(0);
    expect(copies(waitingTarget)).toEqual(once(waitingIds));
    expect(copies(delayedTarget)).toEqual(once(delayedIds));
    expect(doneTarget.received).toHaveLength(0);
    for (const r of [waitingTarget, delayedTarget]) expect(r.received.every((d) => d.verifyError === null)).toBe(true);
  }, 90_000);
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

    const replica = await startNewWorker(h);
    try {
      await eventually("every migrated delivery delivered", async () => (await h.prisma.deliveryState.count({ where: { deliveryId: { in: ids.flat() } } })) === 0, {
        timeoutMs: 30_000,
      });
      targets.forEach((t, i) => expect(copies(t)).toEqual(once(ids[i]!)));
      expect(await h.prisma.deliveryAttempt.count({ where: { endpointId: { in: endpoints.map((e) => e.id) } } })).toBe(5);
    } finally {
      await replica.close();
    }
  }, 60_000);
});

describe("a worker that meets a job of the earlier version (the step skipped)", () => {
  let h: Harness;
  beforeAll(async () => {
    // No reconciler: what the old job does is all that happens.
    h = await startHarness({ reconcile: null });
  });
  afterAll(async () => {
    await h.close();
  });

  it("sends nothing for it and fails it for good; the endpoint's deliveries go out when it is woken", async () => {
    const world = await h.createWorld();
    const target = await receiver();
    const endpoint = await h.createEndpoint(world.id, { url: target.url });
    target.setSecret(endpoint.secret);
    const ids = await migrated(h, endpoint, 2);
    const failures: { name: string; message: string }[] = [];
    const onFailed = (job: Job | undefined, err: Error): void => void (job?.name === OLD_JOB_NAME && failures.push({ name: job.name, message: err.message }));
    for (const w of h.worker.deliveries.workers) w.on("failed", onFailed);
    try {
      for (const id of ids) await addOldJob(h, id, endpoint.id);
      await eventually("both old jobs failed", () => failures.length === ids.length);
    } finally {
      for (const w of h.worker.deliveries.workers) w.off("failed", onFailed);
    }
    for (const f of failures) expect(f.message).toContain("upgrade-queues");
    // Failed for good: never retried (a failed job is kept as its own options say, or not at all).
    for (const id of ids) expect(["failed", "unknown"]).toContain(await h.deliveries.queueFor(endpoint.id).getJobState(id));
    expect(target.received).toHaveLength(0);
    expect(await h.prisma.deliveryState.count({ where: { deliveryId: { in: ids }, status: "pending" } })).toBe(ids.length);

    // Still pending in PostgreSQL: the reconciler's wake (here, as a producer's) sends them once.
    await h.wake([endpoint.id]);
    await eventually("both delivered", async () => (await h.prisma.deliveryState.count({ where: { deliveryId: { in: ids } } })) === 0, { timeoutMs: 30_000 });
    expect(copies(target)).toEqual(once(ids));
  }, 60_000);
});
