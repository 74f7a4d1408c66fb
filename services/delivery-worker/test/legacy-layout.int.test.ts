/**
 * An upgrade from the key layout without hash tags (src/legacy-queues.ts): endpoint-disabled mails
 * and a recover job queued by the earlier version under `<prefix>:bull:<queue>:…` (one waiting,
 * one delayed) are run by the new workers, once each, however many of them start at once; the old
 * keys end up holding nothing, and a worker started afterwards runs nothing again.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { Queue } from "bullmq";
import { DeliveryRecoveries, prismaRunner } from "@vw/db";
import { DEFAULT_JOB_OPTIONS, INFRA_ATTEMPTS, INFRA_BACKOFF_TYPE, JOB_NAMES, QUEUE_NAMES, bullPrefix, enqueueEndpointDisabledMail, enqueueRecovery } from "@vw/queues";
import { eventually, spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { LEGACY_RUN_QUEUES, legacyQueueHoldsJobs } from "../src/legacy-queues.js";
import { startHarness, type Harness } from "./harness.js";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const HOUR = 3_600_000;

let h: Harness;
let receiver: WebhookReceiver;
const workers: ServiceProcess[] = [];
beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  receiver = await startWebhookReceiver({ answer: 204 });
}, 60_000);
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await receiver?.close();
  await h?.close();
});

/** A queue handle of the earlier layout: the untagged prefix and the defaults the earlier version used. */
const legacyQueue = (name: string) => new Queue(name, { connection: h.redis, prefix: bullPrefix(h.keyPrefix), defaultJobOptions: DEFAULT_JOB_OPTIONS });

/** The log lines of `worker` with this message. */
const logLines = (worker: ServiceProcess, msg: string) =>
  worker
    .stdout()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { msg: string; legacyQueue?: string })
    .filter((entry) => entry.msg === msg);

const startWorker = async () => {
  const worker = await spawnService(join(servicesDir, "delivery-worker"), h.processEnv({ SMTP_URL: h.smtp.url, LOG_LEVEL: "info", SCHEDULER_SWEEP_MS: "200" }), { readyTimeoutMs: 60_000 });
  workers.push(worker);
  return worker;
};

it("runs the notification and recovery jobs left under the old keys, once each, and leaves those keys empty", async () => {
  const world = await h.createWorld({ adminEmails: ["legacy-admin@example.com"] });
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
  receiver.setSecret(endpoint.secret);
  // Two deliveries that had failed before the upgrade, and a recovery of them not run yet.
  const failed = [await h.seedDelivery(endpoint, { enqueue: false }), await h.seedDelivery(endpoint, { enqueue: false })];
  await h.prisma.webhookDelivery.updateMany({ where: { id: { in: failed } }, data: { status: "failed", nextAttemptAt: null } });
  const recovery = await new DeliveryRecoveries(prismaRunner(h.prisma)).create({ endpointId: endpoint.id, since: new Date(Date.now() - HOUR), until: new Date(Date.now() + 1000), total: 2 });

  const notifications = legacyQueue(QUEUE_NAMES.notifications);
  const recoveries = legacyQueue(QUEUE_NAMES.recoveries);
  const mail = (at: number) => ({ endpointId: endpoint.id, reason: "gone" as const, disabledAt: new Date(at).toISOString(), deliveryId: failed[0]!, status: 410, error: null, consecutiveFailures: 1 });
  await enqueueEndpointDisabledMail(notifications, mail(Date.now() - 2000));
  // One waits for a retry (delayed), as a mail whose SMTP relay was down would.
  const retried = mail(Date.now() - 1000);
  await notifications.add(JOB_NAMES.endpointDisabledMail, retried, { jobId: `${endpoint.id}-${Date.parse(retried.disabledAt)}`, delay: 500, attempts: INFRA_ATTEMPTS, backoff: { type: INFRA_BACKOFF_TYPE } });
  await enqueueRecovery(recoveries, { recoveryId: recovery.id });
  expect(await notifications.getJobCounts("wait", "delayed")).toEqual({ wait: 1, delayed: 1 });
  for (const name of LEGACY_RUN_QUEUES) expect([name, await legacyQueueHoldsJobs(h.redis, h.keyPrefix, name)]).toEqual([name, true]);

  // Two replicas of the new version start at once.
  const started = await Promise.all([startWorker(), startWorker()]);
  const mails = await h.smtp.waitFor(2, 30_000);
  await eventually("the recovery is done", async () => (await new DeliveryRecoveries(prismaRunner(h.prisma)).get(recovery.id))?.status === "done", { timeoutMs: 30_000 });
  await eventually("both recovered deliveries are delivered", async () => (await h.prisma.webhookDelivery.count({ where: { id: { in: failed }, status: "delivered" } })) === 2, { timeoutMs: 30_000 });
  for (const name of LEGACY_RUN_QUEUES) {
    await eventually(`the old ${name} queue holds no job`, async () => !(await legacyQueueHoldsJobs(h.redis, h.keyPrefix, name)));
  }
  // A replica that ran jobs of an old queue closes that queue's worker once it is empty.
  await eventually("each replica closed the workers it started on the old keys", () =>
    started.every((w) => logLines(w, "running the jobs left under the old key layout").length === logLines(w, "no job left under the old key layout").length),
  );
  expect(started.flatMap((w) => logLines(w, "running the jobs left under the old key layout")).length).toBeGreaterThan(0);

  // Another worker started now finds nothing there.
  const later = await startWorker();
  await later.stop();
  workers.splice(workers.indexOf(later), 1);
  expect(logLines(later, "running the jobs left under the old key layout")).toEqual([]);

  expect(mails.map((m) => m.to)).toEqual([["legacy-admin@example.com"], ["legacy-admin@example.com"]]);
  expect(h.smtp.messages).toHaveLength(2);
  expect(receiver.received.map((r) => String(r.headers["webhook-id"])).sort()).toEqual([...failed].sort());
  expect(await new DeliveryRecoveries(prismaRunner(h.prisma)).get(recovery.id)).toMatchObject({ status: "done", requeued: 2 });
  expect(await notifications.getJobCounts("wait", "delayed", "active", "failed")).toEqual({ wait: 0, delayed: 0, active: 0, failed: 0 });
  expect(await recoveries.getJobCounts("wait", "delayed", "active", "failed")).toEqual({ wait: 0, delayed: 0, active: 0, failed: 0 });
  await notifications.close();
  await recoveries.close();
}, 120_000);
