/**
 * One endpoint's backlog never holds up the others: each endpoint has its own drain, which sends
 * at most its window at once, so a receiver that hangs, or one with a huge backlog, takes only
 * its window of the worker's attempts (DELIVERY_CONCURRENCY), and another endpoint's deliveries go
 * out meanwhile. Asserted by order (what had happened when the other endpoint's deliveries
 * arrived), never by counts within a time.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness, type TestEndpoint } from "./harness.js";

const WINDOW = 4;
// Far longer than the test waits: the hanging endpoint's requests never end by themselves meanwhile.
const TIMEOUT_MS = 60_000;
let h: Harness;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  // Three endpoints' windows fill the process's attempts: in the second test, the hanging
  // endpoint of the first and two busy ones hold them all, and the quiet endpoint's attempt waits
  // for the next free one like any other.
  h = await startHarness({ deliveryConcurrency: 3 * WINDOW, endpointConcurrency: WINDOW, deliveryTimeoutMs: TIMEOUT_MS, retryDelays: [60_000] });
});
afterAll(async () => {
  // Closed first: the hanging requests end (connection errors), so the worker closes at once.
  await Promise.all(receivers.map((r) => r.close()));
  await h.close();
});

async function receiver(answer: Parameters<typeof startWebhookReceiver>[0] extends infer O ? (O extends { answer?: infer A } ? A : never) : never): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  return r;
}

/** Stores `n` deliveries of the endpoint in one statement and wakes it; returns their ids. */
async function backlog(endpoint: TestEndpoint, n: number): Promise<string[]> {
  return h.storeDeliveries(endpoint, n, { wake: true });
}

it("keeps a healthy endpoint flowing while another one, with a backlog larger than the worker's attempts, hangs on every request", async () => {
  const dead = await receiver("hang");
  const healthy = await receiver(204);
  const world = await h.createWorld();
  const deadEndpoint = await h.createEndpoint(world.id, { url: dead.url });
  const healthyEndpoint = await h.createEndpoint(world.id, { url: healthy.url });
  // The hanging endpoint's backlog comes first, and is under way before the healthy one's.
  await backlog(deadEndpoint, 30);
  await dead.waitFor(WINDOW, 30_000);
  const healthyIds = await backlog(healthyEndpoint, 40);

  const results = await Promise.all(healthyIds.map((id) => h.settled(healthyEndpoint.id, id)));
  expect(results.map((r) => r.status)).toEqual(healthyIds.map(() => "delivered"));
  expect(healthy.received).toHaveLength(40);
  // Every healthy delivery was answered while the hanging endpoint's first requests still hung:
  // none of those ended (timed out and was logged), and no more than its window was sent.
  expect(await h.prisma.deliveryAttempt.count({ where: { endpointId: deadEndpoint.id } })).toBe(0);
  expect(dead.received).toHaveLength(WINDOW);
  // The rest of its backlog waits in PostgreSQL, pending, for its own drain.
  expect(await h.prisma.deliveryState.count({ where: { endpointId: deadEndpoint.id, status: "pending" } })).toBe(30);
});

it("sends a new delivery of a quiet endpoint while two others work through large backlogs", async () => {
  // Each of the busy receivers takes 25 ms per request, so its backlog needs at least
  // 1000 / WINDOW * 25 ms (6 s) however fast the machine is.
  const slow = (_req: unknown, res: import("node:http").ServerResponse): void => {
    setTimeout(() => {
      res.statusCode = 200;
      res.end();
    }, 25);
  };
  const busy = [await receiver(slow), await receiver(slow)];
  const quietAt: number[] = [];
  const quiet = await receiver((_req, res) => {
    // What the busy receivers had got when the quiet one's delivery arrived.
    quietAt.push(...busy.map((b) => b.received.length));
    res.statusCode = 204;
    res.end();
  });
  const world = await h.createWorld();
  const busyEndpoints = [await h.createEndpoint(world.id, { url: busy[0]!.url }), await h.createEndpoint(world.id, { url: busy[1]!.url })];
  const quietEndpoint = await h.createEndpoint(world.id, { url: quiet.url });
  for (const e of busyEndpoints) await backlog(e, 1000);
  // Both backlogs are being sent (with the hanging endpoint's, their windows hold every attempt
  // slot of the worker) ...
  await Promise.all(busy.map((b) => b.waitFor(WINDOW, 30_000)));
  // ... when the quiet endpoint gets one delivery.
  const [quietId] = await backlog(quietEndpoint, 1);
  expect((await h.settled(quietEndpoint.id, quietId!, ["delivered"], 60_000)).status).toBe("delivered");
  expect(quiet.received).toHaveLength(1);
  // It did not wait for either backlog: both still had most of their deliveries to send.
  expect(quietAt).toHaveLength(2);
  for (const got of quietAt) expect(got).toBeLessThan(500);
  // And they go on to the end.
  await eventually(
    "both backlogs delivered",
    async () => (await h.prisma.deliveryState.count({ where: { endpointId: { in: busyEndpoints.map((e) => e.id) } } })) === 0,
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  expect(busy.map((b) => b.received.length)).toEqual([1000, 1000]);
}, 180_000);
