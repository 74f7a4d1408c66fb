/**
 * Retry-After, as a receiver sends it: a 429 or 503 with a number of seconds or an HTTP date makes
 * the next attempt due no sooner than the receiver asked (within RETRY_AFTER_MAX_S), spends no
 * extra attempt, and the history says why the next attempt is later than the schedule. An
 * unreadable value, or one on another status, changes nothing. Every assertion is on the order and
 * the times the attempts were logged with, never on how much happened within a window.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

/** The schedule: quick retries, so a wait the receiver asked for stands out from it. */
const RETRY_DELAYS = [100, 100, 100];

let h: Harness;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  h = await startHarness({ retryDelays: RETRY_DELAYS, retryAfterMaxMs: 4_000 });
}, 60_000);
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await h?.close();
});

/** An endpoint whose receiver answers `first` (status and headers) once, then 200. */
async function endpointAnsweringOnce(status: number, headers: Record<string, string>) {
  let answered = 0;
  const receiver = await startWebhookReceiver({
    answer: (_req, res) => {
      answered += 1;
      res.writeHead(answered === 1 ? status : 200, answered === 1 ? headers : {});
      res.end("ok");
    },
  });
  receivers.push(receiver);
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
  receiver.setSecret(endpoint.secret);
  return { receiver, endpoint };
}

async function attemptsOf(deliveryId: string) {
  return h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
}

it("waits as long as a 429's Retry-After in seconds asks, says why in the history, and spends no extra attempt", async () => {
  const { receiver, endpoint } = await endpointAnsweringOnce(429, { "Retry-After": "2" });
  const deliveryId = await h.seedDelivery(endpoint);
  await receiver.waitFor(1);

  const waiting = await eventually("the history says why the next attempt waits", async () => {
    const row = await h.delivery(endpoint.id, deliveryId);
    return row?.status === "pending" && row.attemptCount === 1 ? row : null;
  });
  expect(waiting.waitReason).toBe("the receiver asked to wait 2 seconds");
  expect(waiting.nextAttemptAt).not.toBeNull();

  await receiver.waitFor(2, 20_000);
  const done = await h.settled(endpoint.id, deliveryId, ["delivered"]);
  expect(done.attemptCount).toBe(2);
  expect(done.waitReason).toBeNull();
  const [first, second] = await attemptsOf(deliveryId);
  expect(first).toMatchObject({ responseStatus: 429, verdict: "retry" });
  expect(second).toMatchObject({ responseStatus: 200, verdict: "delivered" });
  // The schedule alone would have tried again 100 ms later.
  expect(second!.startedAt.getTime() - first!.startedAt.getTime()).toBeGreaterThanOrEqual(2_000 - 50);
  for (const got of receiver.received) expect(got.verifyError).toBeNull();
}, 60_000);

it("takes a 503's Retry-After as an HTTP date", async () => {
  const until = new Date(Math.ceil((Date.now() + 3_000) / 1000) * 1000);
  const { receiver, endpoint } = await endpointAnsweringOnce(503, { "Retry-After": until.toUTCString() });
  const deliveryId = await h.seedDelivery(endpoint);
  await receiver.waitFor(2, 20_000);
  await h.settled(endpoint.id, deliveryId, ["delivered"]);
  const [, second] = await attemptsOf(deliveryId);
  expect(second!.startedAt.getTime()).toBeGreaterThanOrEqual(until.getTime() - 50);
}, 60_000);

it("caps the wait at RETRY_AFTER_MAX_S, and says so", async () => {
  const { receiver, endpoint } = await endpointAnsweringOnce(429, { "Retry-After": "600" });
  const deliveryId = await h.seedDelivery(endpoint);
  await receiver.waitFor(1);
  const waiting = await eventually("the history names the cap", async () => {
    const row = await h.delivery(endpoint.id, deliveryId);
    return row?.status === "pending" && row.attemptCount === 1 ? row : null;
  });
  expect(waiting.waitReason).toBe("the receiver asked to wait 10 minutes; waiting the longest allowed, 4 seconds");
  await receiver.waitFor(2, 30_000);
  await h.settled(endpoint.id, deliveryId, ["delivered"]);
  const [first, second] = await attemptsOf(deliveryId);
  expect(second!.startedAt.getTime() - first!.startedAt.getTime()).toBeGreaterThanOrEqual(4_000 - 50);
}, 60_000);

it.each([
  ["an unreadable Retry-After", 429, { "Retry-After": "in a while" }],
  ["a Retry-After on a 500", 500, { "Retry-After": "600" }],
])("ignores %s: the schedule decides, and the history gives no reason", async (_name, status, headers) => {
  // The second request is held until the history has been read: meanwhile the delivery is still
  // pending with what the first attempt's fate recorded.
  let answered = 0;
  let release: (() => void) | null = null;
  const receiver = await startWebhookReceiver({
    answer: (_req, res) => {
      answered += 1;
      if (answered === 1) {
        res.writeHead(status, headers);
        res.end("busy");
      } else {
        release = () => res.end("ok");
      }
    },
  });
  receivers.push(receiver);
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
  receiver.setSecret(endpoint.secret);

  const deliveryId = await h.seedDelivery(endpoint);
  await receiver.waitFor(2, 20_000);
  const pending = await h.delivery(endpoint.id, deliveryId);
  expect(pending).toMatchObject({ status: "pending", attemptCount: 1, waitReason: null });
  release!();
  const done = await h.settled(endpoint.id, deliveryId, ["delivered"]);
  expect(done.attemptCount).toBe(2);
  expect((await attemptsOf(deliveryId)).map((a) => [a.responseStatus, a.verdict])).toEqual([
    [status, "retry"],
    [200, "delivered"],
  ]);
}, 60_000);
