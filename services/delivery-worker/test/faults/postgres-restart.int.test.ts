/**
 * PostgreSQL crashes (immediate stop) and comes back while events flow: no process dies or hangs,
 * `/readyz` of every service says the database is what is missing (the worker takes no new
 * deliveries meanwhile), and says ready again once it is back; deliveries resume by themselves,
 * every accepted event reaches its receivers, none twice (an attempt answered during the outage
 * waits to be logged instead of being sent again), and no attempt is logged against a receiver
 * for the outage.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually } from "@vw/testing";
import { RECORD_RETRY_MS } from "../../src/delivery-store.js";
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

  const stoppedAt = Date.now();
  await stack.postgres.stopImmediate();
  // Every service says the database is what is missing (a busy machine may take its time).
  for (const service of stack.services()) {
    await eventually(`${service.url}/readyz answers 503 naming the database`, async () => {
      const r = await stack.readiness(service);
      return r.status === 503 && r.failing.includes("database");
    }, { timeoutMs: 30_000, intervalMs: 100 });
  }
  const downAt = Date.now();
  await eventually("the outage lasted 3 s", () => Date.now() - downAt >= 3000, { intervalMs: 100 });
  await stack.postgres.start();
  const backAt = Date.now();

  // Deliveries resume by themselves, and every service says it is ready again.
  const before = stack.endpoints.map((e) => e.receiver.received.length);
  await eventually("a delivery arrived after PostgreSQL came back", () => stack.endpoints.some((e, i) => e.receiver.received.length > before[i]!), { timeoutMs: 60_000 });
  process.stdout.write(`[faults] postgres: first delivery ${Date.now() - backAt} ms after the restart\n`);
  for (const service of stack.services()) {
    await eventually(`${service.url}/readyz answers 200 again`, async () => (await stack.readiness(service)).status === 200, { timeoutMs: 60_000 });
  }
  const run = await producer.stop();

  const extra = await stack.verify(run);
  // An attempt answered while PostgreSQL was down is logged once it is back, not sent again: its
  // write waits RECORD_RETRY_MS for PostgreSQL. A restart that took longer than that (a machine
  // very busy) may have made copies of what was in flight, which verify bounded.
  const outageMs = backAt - stoppedAt;
  process.stdout.write(`[faults] postgres: down for ${outageMs} ms\n`);
  if (outageMs < RECORD_RETRY_MS / 2) expect(extra).toBe(0);
  // The outage was the platform's: no attempt against a receiver failed, none counted.
  // Each such attempt is listed with what it said, so a failure tells why it was logged.
  const failedAttempts = await stack.prisma.deliveryAttempt.findMany({
    where: { verdict: { not: "delivered" } },
    select: { verdict: true, errorKind: true, error: true, responseStatus: true, durationMs: true, startedAt: true },
  });
  const failures = await stack.prisma.webhookEndpoint.findMany({ select: { consecutiveFailures: true, enabled: true } });
  expect({ failedAttempts, failures }).toEqual({ failedAttempts: [], failures: failures.map(() => ({ consecutiveFailures: 0, enabled: true })) });
  // Nothing stranded: every delivery stored (an intake's commit that its producer never heard of
  // included) was delivered.
  await stack.allDelivered();
  report("PostgreSQL immediate stop and restart under load", run, extra);
}, FAULT_TEST_TIMEOUT_MS);
