/**
 * At least once across a crash, and how many copies it costs: two worker replicas killed with
 * SIGKILL while deliveries are in flight lose none of them. Their drain jobs come back to a new
 * worker (the lock expires); what the killed drains had claimed comes back once the claims' lease
 * ends (four attempt timeouts and 10 s) and the reconciler's sweep wakes the endpoint. Every
 * delivery reaches its receiver, signed, and ends `delivered`; the only copies are the requests
 * that were in flight at the kill (sent, never logged), so at most replicas × DELIVERY_CONCURRENCY.
 */
import type { ServerResponse } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness, type TestEndpoint } from "./harness.js";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const REPLICAS = 2;
const CONCURRENCY = 4;
/** Requests answered before the receivers start holding them (their attempts are logged before the kill). */
const ANSWERED_FIRST = 10;

let h: Harness;
const receivers: WebhookReceiver[] = [];
const processes: ServiceProcess[] = [];
/** Requests held unanswered, by delivery id; after the kill, the ones the killed workers had in flight. */
const held = new Map<string, ServerResponse>();
let answered = 0;
let holding = true;

beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
});
afterAll(async () => {
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) await p.kill9();
  await h?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

/** Answers the first requests, then holds every one until the kill; answers everything after it. */
function answer(req: { headers: Record<string, unknown> }, res: ServerResponse): void {
  if (holding && answered >= ANSWERED_FIRST) {
    held.set(String(req.headers["webhook-id"]), res);
    return;
  }
  answered += 1;
  res.statusCode = 200;
  res.end();
}

function spawnWorker(): Promise<ServiceProcess> {
  return spawnService(
    serviceDir,
    h.processEnv({
      RETRY_DELAYS: "100ms,200ms",
      // Longer than the test holds requests before the kill (a held request that times out first
      // is logged, so it is no copy), short enough for a lease of 4 × 5 s + 10 s.
      DELIVERY_TIMEOUT_MS: "5000",
      JOB_LOCK_MS: "1500",
      DELIVERY_CONCURRENCY: String(CONCURRENCY),
      RECONCILE_INTERVAL_MS: "1000",
    }),
    { readyTimeoutMs: 60_000 },
  ).then((p) => {
    processes.push(p);
    return p;
  });
}

it("kill -9 of every replica with deliveries in flight: each delivery arrives, and the copies are what was in flight", async () => {
  const world = await h.createWorld();
  const endpoints: TestEndpoint[] = [];
  for (let i = 0; i < 4; i += 1) {
    const receiver = await startWebhookReceiver({ answer });
    receivers.push(receiver);
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
    receiver.setSecret(endpoint.secret);
    endpoints.push(endpoint);
  }
  const killed = await Promise.all(Array.from({ length: REPLICAS }, () => spawnWorker()));
  const seeded: { endpoint: TestEndpoint; deliveryId: string }[] = [];
  for (const endpoint of endpoints) for (let i = 0; i < 15; i += 1) seeded.push({ endpoint, deliveryId: await h.seedDelivery(endpoint, { wake: false }) });
  const ids = seeded.map((s) => s.deliveryId);
  await h.wake(endpoints.map((e) => e.id));

  // The first requests answered and logged, a replica's every attempt slot taken by a held request:
  // what the workers have sent and not logged is what they hold in flight.
  await eventually("a replica's slots are all in flight", () => held.size >= CONCURRENCY, { timeoutMs: 30_000 });
  await eventually(
    "the answered attempts are logged",
    async () => (await h.prisma.deliveryAttempt.count({ where: { deliveryId: { in: ids }, verdict: "delivered" } })) === ANSWERED_FIRST,
    { timeoutMs: 30_000 },
  );
  await Promise.all(killed.map((p) => p.kill9()));
  // Sent and never logged by the killed workers: the requests held whose delivery has no attempt.
  const loggedAtKill = await h.prisma.deliveryAttempt.groupBy({ by: ["deliveryId"], where: { deliveryId: { in: ids } } });
  const logged = new Set(loggedAtKill.map((a) => a.deliveryId));
  const inFlight = [...held.keys()].filter((id) => !logged.has(id));
  expect(inFlight.length).toBeGreaterThan(0);
  expect(inFlight.length).toBeLessThanOrEqual(REPLICAS * CONCURRENCY);
  // Their connections are gone with the workers; from now on every request is answered.
  holding = false;
  for (const res of held.values()) res.destroy();
  const deliveredAtKill = await h.prisma.deliveryAttempt.count({ where: { deliveryId: { in: ids }, verdict: "delivered" } });
  expect(deliveredAtKill).toBeLessThan(ids.length);

  await spawnWorker();
  const settled = await Promise.all(seeded.map((s) => h.settled(s.endpoint.id, s.deliveryId, ["delivered"], 90_000)));
  expect(settled.map((d) => d.status)).toEqual(ids.map(() => "delivered"));

  const received = receivers.flatMap((r) => r.received);
  expect(received.every((r) => r.verifyError === null)).toBe(true);
  const times = new Map<string, number>();
  for (const r of received) times.set(String(r.headers["webhook-id"]), (times.get(String(r.headers["webhook-id"])) ?? 0) + 1);
  expect(ids.filter((id) => !times.has(id))).toEqual([]);
  // A copy is a request the log never knew of: received more often than its attempts were logged.
  const attempts = await h.prisma.deliveryAttempt.groupBy({ by: ["deliveryId"], where: { deliveryId: { in: ids } }, _count: { _all: true } });
  const copies = new Map(attempts.map((a) => [a.deliveryId, (times.get(a.deliveryId) ?? 0) - a._count._all] as const).filter(([, n]) => n !== 0));
  // The requests in flight at the kill were sent again, once each, and the copies are never more
  // than the killed workers could have had in flight.
  expect(inFlight.filter((id) => !copies.has(id))).toEqual([]);
  expect([...copies.values()].every((n) => n === 1)).toBe(true);
  expect(copies.size).toBeLessThanOrEqual(REPLICAS * CONCURRENCY);
}, 180_000);
