/**
 * At least once across a crash: a worker process killed with SIGKILL while deliveries are in
 * flight loses none of them; after a new worker starts, every delivery reaches the receiver at
 * least once, signed, and ends `delivered`.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
let h: Harness;
let probe: WebhookReceiver;
const processes: ServiceProcess[] = [];

beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  // Slow answers keep deliveries in flight when the worker is killed.
  probe = await startWebhookReceiver({
    answer: (_req, res) => {
      setTimeout(() => {
        res.statusCode = 200;
        res.end();
      }, 250);
    },
  });
});
afterAll(async () => {
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) await p.kill9();
  await h.close();
  await probe.close();
});

function spawnWorker(): Promise<ServiceProcess> {
  return spawnService(
    serviceDir,
    // A kill between a job's move to the delayed set and its park leaves it delayed until the park
    // timeout, the safety net of that window (delivery-worker README, "Failure cases"): at its
    // smallest here, so such a job comes back within the test's patience, as it would within the
    // configured timeout in production.
    h.processEnv({
      RETRY_DELAYS: "100ms,200ms",
      DELIVERY_TIMEOUT_MS: "5000",
      JOB_LOCK_MS: "1500",
      DELIVERY_CONCURRENCY: "20",
      SCHEDULER_PARK_TIMEOUT_MS: "10000",
    }),
  ).then((p) => {
    processes.push(p);
    return p;
  });
}

it("kill -9 with deliveries in flight: every delivery is received at least once after a restart", async () => {
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: probe.url });
  probe.setSecret(endpoint.secret);
  const first = await spawnWorker();
  const ids: string[] = [];
  for (let i = 0; i < 60; i += 1) ids.push(await h.seedDelivery(endpoint));

  await probe.waitFor(5, 30_000);
  await first.kill9();
  const receivedAtKill = new Set(probe.received.map((r) => String(r.headers["webhook-id"])));
  expect(receivedAtKill.size).toBeLessThan(ids.length);

  await spawnWorker();
  await eventually(
    `the receiver got each of the ${ids.length} deliveries`,
    () => {
      const seen = new Set(probe.received.map((r) => String(r.headers["webhook-id"])));
      return ids.every((id) => seen.has(id));
    },
    { timeoutMs: 45_000 },
  );
  expect(probe.received.every((r) => r.verifyError === null)).toBe(true);

  // And the log agrees once the last writes land: every delivery ends delivered.
  await eventually(
    "every delivery is delivered in the log",
    async () => (await h.prisma.webhookDelivery.count({ where: { id: { in: ids }, status: { not: "delivered" } } })) === 0,
    { timeoutMs: 15_000 },
  );
}, 90_000);
