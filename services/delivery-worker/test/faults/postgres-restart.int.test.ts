/**
 * PostgreSQL crashes (immediate stop) and comes back while events flow: no process dies or hangs,
 * `/readyz` says which dependency is gone, deliveries resume by themselves, every accepted event
 * reaches its receivers, none twice (an attempt answered during the outage waits to be logged
 * instead of being sent again), and no attempt is logged against a receiver for the outage.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually } from "@vw/testing";
import { FAULT_TEST_TIMEOUT_MS, report, startFaultStack, type FaultStack } from "./fault-stack.js";

let stack: FaultStack;
beforeAll(async () => {
  stack = await startFaultStack({ receivers: [200, 200], httpServices: true });
}, 120_000);
afterAll(async () => {
  await stack?.close();
}, FAULT_TEST_TIMEOUT_MS);

it("PostgreSQL stopped immediately and restarted under load: nothing lost, nothing spent", async () => {
  const producer = stack.produce();
  await eventually("deliveries flow before the fault", () => stack.endpoints.every((e) => e.receiver.received.length >= 20));

  await stack.postgres.stopImmediate();
  // Within 5 s, both services say the database is what is missing.
  for (const service of stack.services()) {
    await eventually(`${service.url}/readyz answers 503 naming the database`, async () => {
      const r = await stack.readiness(service);
      return r.status === 503 && r.failing.includes("database");
    }, { timeoutMs: 5000, intervalMs: 100 });
  }
  const downAt = Date.now();
  await eventually("the outage lasted 3 s", () => Date.now() - downAt >= 3000, { intervalMs: 100 });
  await stack.postgres.start();
  const backAt = Date.now();

  // Deliveries resume by themselves within 10 s of its return.
  const before = stack.endpoints.map((e) => e.receiver.received.length);
  await eventually("a delivery arrived after PostgreSQL came back", () => stack.endpoints.some((e, i) => e.receiver.received.length > before[i]!), { timeoutMs: 10_000 });
  process.stdout.write(`[faults] postgres: first delivery ${Date.now() - backAt} ms after the restart\n`);
  await eventually("event-ingest ready again", async () => (await stack.readiness(stack.ingest)).status === 200, { timeoutMs: 10_000 });
  const run = await producer.stop();

  const extra = await stack.verify(run);
  // An attempt answered while PostgreSQL was down is logged once it is back, not sent again.
  expect(extra).toBe(0);
  // The outage was the platform's: no attempt against a receiver failed, none counted.
  // Each such attempt is listed with what it said, so a failure tells why it was logged.
  const failedAttempts = await stack.prisma.deliveryAttempt.findMany({
    where: { verdict: { not: "delivered" } },
    select: { verdict: true, errorKind: true, error: true, responseStatus: true, durationMs: true, startedAt: true },
  });
  const failures = await stack.prisma.webhookEndpoint.findMany({ select: { consecutiveFailures: true, enabled: true } });
  expect({ failedAttempts, failures }).toEqual({ failedAttempts: [], failures: failures.map(() => ({ consecutiveFailures: 0, enabled: true })) });
  // Nothing stranded: even the deliveries of requests refused during the outage (stored, their
  // jobs not queued) were sent by the reconciler.
  await eventually("every stored delivery was delivered", async () => (await stack.prisma.webhookDelivery.count({ where: { status: { not: "delivered" } } })) === 0);
  report("PostgreSQL immediate stop and restart under load", run, extra);
}, FAULT_TEST_TIMEOUT_MS);
