/**
 * Recover from end to end: admin-api as its own process takes `POST .../recover`, the in-process
 * worker runs the `recover.v1` job, and every failed delivery of the window reaches a verifying
 * `standardwebhooks` receiver again under its deliveryId with its original bytes. Then the run
 * itself: batches and their cursor, and an endpoint disabled before the job runs.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Job } from "bullmq";
import { DeliveryLog, newDeliveryId, prismaRunner } from "@vw/db";
import { DrainSignals, JOB_NAMES, QUEUE_NAMES, drainJobId, openDeliveryQueues } from "@vw/queues";
import { deleteKeysUnder, spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { runRecovery } from "../src/recover.js";
import { silentLogger, startHarness, type Harness, type TestEndpoint } from "./harness.js";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const ADMIN_TOKEN = "recover-admin-token-5b1e9d3a7c2f8064";
const HOUR = 3_600_000;

let h: Harness;
let admin: ServiceProcess;
let probe: WebhookReceiver;
beforeAll(async () => {
  // One retry 50 ms later, then the delivery is failed.
  h = await startHarness({ retryDelays: [50] });
  probe = await startWebhookReceiver({ answer: 503 });
  admin = await spawnService(join(servicesDir, "admin-api"), h.processEnv({ ADMIN_TOKEN }));
}, 60_000);
afterAll(async () => {
  await admin?.stop();
  await h.close();
  await probe.close();
});

/** Resolves with the result of the recover job `recoveryId` once the in-process worker completes it. */
function recoverCompletion(recoveryId: string): Promise<unknown> {
  const worker = h.worker.workers.find((w) => w.name === QUEUE_NAMES.recoveries);
  if (!worker) throw new Error("no recoveries worker");
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`recover job ${recoveryId} did not complete`)), 30_000);
    const onDone = (job: Job, result: unknown) => {
      if (job.id !== recoveryId) return;
      clearTimeout(timer);
      worker.off("completed", onDone);
      resolve(result);
    };
    worker.on("completed", onDone);
  });
}

/** The status of each of `deliveryIds` as the history shows it, by id. */
async function statuses(endpointId: string, deliveryIds: readonly string[]): Promise<Record<string, string | undefined>> {
  return Object.fromEntries(await Promise.all(deliveryIds.map(async (id) => [id, (await h.delivery(endpointId, id))?.status] as const)));
}

async function adminCall(method: string, path: string, body?: unknown) {
  const res = await fetch(`${admin.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** Seeds `n` deliveries that fail against the probe (503 twice); returns their ids. */
async function failedDeliveries(endpoint: TestEndpoint, n: number): Promise<string[]> {
  const ids = await Promise.all(Array.from({ length: n }, () => h.seedDelivery(endpoint)));
  expect(await Promise.all(ids.map(async (id) => (await h.settled(endpoint.id, id)).status))).toEqual(ids.map(() => "failed"));
  return ids;
}

/**
 * Runs one step of a long test, and says so when it took over 5 s: on a busy machine the test's
 * timeout then names the steps that were slow, and the step it stopped in is the first one missing.
 */
async function step<T>(name: string, run: () => Promise<T>): Promise<T> {
  const start = Date.now();
  try {
    return await run();
  } finally {
    const ms = Date.now() - start;
    if (ms > 5000) console.warn(`[recover] slow step "${name}": ${ms} ms`);
  }
}

describe("recover after a receiver outage", () => {
  it("counts the failed deliveries of the window, then sends each again: same webhook-id, same bytes, verified", async () => {
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    probe.answerWith(503);
    const failed = await step("5 deliveries failed", () => failedDeliveries(endpoint, 5));
    // A failure from before the window stays failed: a delivery created two days ago (its id's
    // time is its creation time; the delivery log has daily partitions from yesterday on, so that
    // day needs its own).
    const oldAt = new Date(Date.now() - 48 * HOUR);
    await h.prisma.$queryRaw`SELECT vw_create_log_partitions((${oldAt}::timestamptz AT TIME ZONE 'UTC')::date, (${oldAt}::timestamptz AT TIME ZONE 'UTC')::date)`;
    const old = newDeliveryId(oldAt);
    await new DeliveryLog(prismaRunner(h.prisma)).create([{ id: old, endpointId: endpoint.id, worldId: world.id, type: "visitor.registered", body: Buffer.from('{"old":true}') }]);
    await h.wake([endpoint.id]);
    expect((await step("the old delivery failed", () => h.settled(endpoint.id, old))).status).toBe("failed");
    // The receiver is back; a delivery sent now is delivered and not part of any recover.
    probe.answerWith(204);
    const delivered = await h.seedDelivery(endpoint);
    expect((await step("a new delivery delivered", () => h.settled(endpoint.id, delivered))).status).toBe("delivered");

    const firstBodies = new Map(probe.received.map((r) => [String(r.headers["webhook-id"]), r.body]));
    const receivedBefore = probe.received.length;
    const path = `/worlds/${world.organizationSlug}/${world.slug}/endpoints/${endpoint.id}`;
    const since = new Date(Date.now() - HOUR).toISOString();

    expect(await adminCall("POST", `${path}/recover`, { since, dryRun: true })).toEqual({ status: 200, body: { count: 5 } });

    const started = await adminCall("POST", `${path}/recover`, { since });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({ status: expect.stringMatching(/^(queued|running|done)$/), total: 5, since });
    const finished = recoverCompletion(started.body.id);
    const received = (await step("the 5 recovered received", () => probe.waitFor(receivedBefore + 5))).slice(receivedBefore);
    await step("the recover job completed", () => finished);
    // The receiver has answered; the worker records each outcome just after it.
    expect(await step("the 5 recorded delivered", () => Promise.all(failed.map(async (id) => (await h.settled(endpoint.id, id)).status)))).toEqual(failed.map(() => "delivered"));

    expect(received.map((r) => String(r.headers["webhook-id"])).sort()).toEqual([...failed].sort());
    for (const r of received) {
      expect(r.verifyError).toBeNull();
      expect(r.body.equals(firstBodies.get(String(r.headers["webhook-id"]))!)).toBe(true);
    }
    expect(await adminCall("GET", `${path}/recoveries/${started.body.id}`)).toMatchObject({
      status: 200,
      body: { id: started.body.id, status: "done", total: 5, requeued: 5, error: null },
    });
    expect(await statuses(endpoint.id, [...failed, old, delivered])).toEqual({
      ...Object.fromEntries(failed.map((id) => [id, "delivered"])),
      [old]: "failed",
      [delivered]: "delivered",
    });
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId: failed[0]! }, orderBy: { attemptNumber: "asc" } });
    expect(attempts.map((a) => [a.trigger, a.responseStatus])).toEqual([
      ["initial", 503],
      ["retry", 503],
      ["replay", 204],
    ]);

    // Nothing is left to recover in that window.
    expect((await adminCall("POST", `${path}/recover`, { since, dryRun: true })).body).toEqual({ count: 0 });
    expect(probe.received).toHaveLength(receivedBefore + 5);
    // Alone it takes about a second. Beside the whole suite with both cores busy it once ran out of
    // the default 30 s, which is also the harness reconciler's sweep; the bound is for a hang.
  }, 120_000);
});

describe("runRecovery", () => {
  it("re-queues batch by batch, recording the cursor and count after each", async () => {
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    probe.answerWith(503);
    const failed = await failedDeliveries(endpoint, 5);
    const recoveries = h.worker.db.recoveries;
    const recovery = await recoveries.create({ endpointId: endpoint.id, since: new Date(Date.now() - HOUR), until: new Date(), total: 5 });
    // A deliveries queue no worker reads, so the drain jobs the wakes add are all still there to look at.
    const idleShards = openDeliveryQueues(h.redis, `${h.keyPrefix}-idle`, 1);
    const idle = idleShards.shards[0]!;
    const idleSignals = new DrainSignals(idleShards);
    const outcome = await runRecovery({ sql: h.worker.db.sql, recoveries: h.worker.db.recoveries, log: h.worker.db.log, history: h.worker.db.history, signals: idleSignals, logger: silentLogger, batchSize: 2 }, recovery.id);
    expect(outcome).toEqual({ status: "done", requeued: 5 });
    const row = await recoveries.get(recovery.id);
    expect(row).toMatchObject({ status: "done", requeued: 5, error: null });
    const last = await h.prisma.webhookDelivery.findMany({ where: { id: { in: failed } }, orderBy: [{ createdAt: "desc" }, { id: "desc" }], take: 1 });
    expect(row?.cursorId).toBe(last[0]?.id);
    // Each batch woke the endpoint: one drain job for it (the later wakes found it there).
    const jobs = await idle.getJobs(["waiting"]);
    expect(jobs.map((j) => [j.id, j.name, j.data.endpointId])).toEqual([[drainJobId(endpoint.id), JOB_NAMES.drain, endpoint.id]]);
    // Every failed delivery is pending again, due now, in a new run.
    const states = await h.prisma.deliveryState.findMany({ where: { deliveryId: { in: failed } }, select: { deliveryId: true, status: true, run: true, runAttempts: true } });
    expect(states.map((s) => [s.deliveryId, s.status, s.run, s.runAttempts]).sort()).toEqual(failed.map((id) => [id, "pending", 1, 0]).sort());
    // Run again (a duplicate or retried job): the recovery has ended, nothing more is put back.
    expect(await runRecovery({ sql: h.worker.db.sql, recoveries: h.worker.db.recoveries, log: h.worker.db.log, history: h.worker.db.history, signals: idleSignals, logger: silentLogger }, recovery.id)).toEqual({ status: "gone" });
    expect((await h.prisma.deliveryState.findMany({ where: { deliveryId: { in: failed } } })).map((s) => s.run)).toEqual(failed.map(() => 1));
    expect(await idle.getJobCounts("waiting")).toEqual({ waiting: 1 });
    await idleShards.close();
    // Its jobs and the endpoint's flag: every key of that layout.
    await deleteKeysUnder(h.redis, `${h.keyPrefix}-idle:`);
  });

  it("stops as failed, saying why, when the endpoint was disabled before the job ran; nothing is sent", async () => {
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.answerWith(503);
    const failed = await failedDeliveries(endpoint, 2);
    await h.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    const recoveries = h.worker.db.recoveries;
    const recovery = await recoveries.create({ endpointId: endpoint.id, since: new Date(Date.now() - HOUR), until: new Date(), total: 2 });
    const receivedBefore = probe.received.length;
    expect(await runRecovery({ sql: h.worker.db.sql, recoveries: h.worker.db.recoveries, log: h.worker.db.log, history: h.worker.db.history, signals: h.signals, logger: silentLogger }, recovery.id)).toEqual({ status: "failed", requeued: 0 });
    expect(await recoveries.get(recovery.id)).toMatchObject({ status: "failed", requeued: 0, error: expect.stringMatching(/disabled while recovering/) });
    expect(await statuses(endpoint.id, failed)).toEqual(Object.fromEntries(failed.map((id) => [id, "failed"])));
    expect((await h.prisma.deliveryState.findMany({ where: { deliveryId: { in: failed } } })).map((s) => s.run)).toEqual([0, 0]);
    expect(probe.received).toHaveLength(receivedBefore);
  });
});
