/**
 * Replay, as admin-api does it (`DeliveryLog.requeue`, then a wake of the endpoint): the delivery
 * goes back to pending in a new run and is sent again under the same deliveryId, byte-identical
 * body, with a fresh timestamp and signature that a customer's receiver verifies. An attempt of
 * the earlier run still in flight when the Replay comes is logged, but its outcome never undoes
 * the new run.
 */
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { DeliveryLog, prismaRunner } from "@vw/db";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
const receivers: WebhookReceiver[] = [];
let clock = Date.now();

beforeAll(async () => {
  h = await startHarness({ now: () => new Date(clock) });
});
afterAll(async () => {
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

/** What admin-api's Replay does: back to pending as a new run, then a wake of the endpoint. */
async function replay(endpointId: string, deliveryId: string): Promise<void> {
  expect(await new DeliveryLog(prismaRunner(h.prisma)).requeue(endpointId, [deliveryId])).toEqual([deliveryId]);
  await h.wake([endpointId]);
}

const stateOf = (deliveryId: string) => h.prisma.deliveryState.findUnique({ where: { deliveryId }, select: { status: true, run: true } });

it("resends the stored bytes under the same webhook-id with a new timestamp and signature", async () => {
  const probe = await startWebhookReceiver({ answer: 200 });
  receivers.push(probe);
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: probe.url });
  probe.setSecret(endpoint.secret);
  const deliveryId = await h.seedDelivery(endpoint);
  expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");

  clock += 42_000;
  await replay(endpoint.id, deliveryId);
  expect(await stateOf(deliveryId)).toEqual({ status: "pending", run: 1 });
  expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
  await probe.waitFor(2);

  const [original, replayed] = probe.received;
  expect(original!.verifyError).toBeNull();
  expect(replayed!.verifyError).toBeNull();
  expect(replayed!.body.equals(original!.body)).toBe(true);
  expect(replayed!.headers["webhook-id"]).toBe(deliveryId);
  expect(Number(replayed!.headers["webhook-timestamp"]) - Number(original!.headers["webhook-timestamp"])).toBe(42);
  expect(replayed!.headers["webhook-signature"]).not.toBe(original!.headers["webhook-signature"]);
  const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
  expect(attempts.map((a) => [a.attemptNumber, a.trigger, a.responseStatus])).toEqual([
    [1, "initial", 200],
    [2, "replay", 200],
  ]);
  // Delivered again: no state left.
  expect(await stateOf(deliveryId)).toBeNull();
  expect(probe.received).toHaveLength(2);
});

it("an attempt of the earlier run that ends after the Replay is logged but does not undo it", async () => {
  // The receiver holds every request until the test answers it.
  const held: ServerResponse[] = [];
  const probe = await startWebhookReceiver({ answer: (_req, res) => void held.push(res) });
  receivers.push(probe);
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: probe.url });
  probe.setSecret(endpoint.secret);
  const deliveryId = await h.seedDelivery(endpoint);
  await eventually("the first run's attempt is at the receiver", () => held.length === 1);

  // Replayed while that attempt is in flight: a new run, due now.
  await replay(endpoint.id, deliveryId);
  expect(await stateOf(deliveryId)).toEqual({ status: "pending", run: 1 });

  // The earlier run's attempt is refused (400: no retry; alone, it would make the delivery failed).
  held[0]!.statusCode = 400;
  held[0]!.end();
  await eventually("the earlier run's attempt is logged", async () => (await h.prisma.deliveryAttempt.count({ where: { deliveryId } })) === 1);
  // The new run is still due: the old attempt moved nothing.
  expect(await stateOf(deliveryId)).toEqual({ status: "pending", run: 1 });

  // The new run is sent and answered.
  await eventually("the Replay's attempt is at the receiver", () => held.length === 2);
  held[1]!.statusCode = 200;
  held[1]!.end();
  expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
  expect(await stateOf(deliveryId)).toBeNull();

  const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
  expect(attempts.map((a) => [a.trigger, a.responseStatus, a.verdict])).toEqual([
    ["initial", 400, "rejected"],
    ["replay", 200, "delivered"],
  ]);
  expect(probe.received.map((r) => [r.headers["webhook-id"], r.verifyError])).toEqual([
    [deliveryId, null],
    [deliveryId, null],
  ]);
  expect(probe.received[1]!.body.equals(probe.received[0]!.body)).toBe(true);
});
