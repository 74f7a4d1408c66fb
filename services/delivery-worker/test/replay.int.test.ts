/**
 * Replay (queued by admin-api with `trigger: "replay"`): the same deliveryId and byte-identical
 * body, with a fresh timestamp and signature that a customer's receiver verifies.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { DeliveryLog, prismaRunner } from "@vw/db";
import { deliverJobId } from "@vw/queues";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
let probe: WebhookReceiver;
let clock = Date.now();

beforeAll(async () => {
  h = await startHarness({ now: () => new Date(clock) });
  probe = await startWebhookReceiver({ answer: 200 });
});
afterAll(async () => {
  await h.close();
  await probe.close();
});

it("resends the stored bytes under the same webhook-id with a new timestamp and signature", async () => {
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: probe.url });
  probe.setSecret(endpoint.secret);
  const deliveryId = await h.seedDelivery(endpoint);
  expect(await h.completion(deliveryId)).toBe("delivered");

  // What admin-api's replay route does: back to pending as a new run, then that run's job.
  clock += 42_000;
  const [requeued] = await new DeliveryLog(prismaRunner(h.prisma)).requeue(endpoint.id, [deliveryId]);
  expect(requeued?.run).toBe(1);
  const replay = { deliveryId, endpointId: endpoint.id, run: requeued!.run };
  await h.enqueue([replay]);
  expect(await h.completion(deliverJobId(replay))).toBe("delivered");

  const [original, replayed] = probe.received;
  expect(replayed!.verifyError).toBeNull();
  expect(replayed!.body.equals(original!.body)).toBe(true);
  expect(replayed!.headers["webhook-id"]).toBe(deliveryId);
  expect(Number(replayed!.headers["webhook-timestamp"]) - Number(original!.headers["webhook-timestamp"])).toBe(42);
  expect(replayed!.headers["webhook-signature"]).not.toBe(original!.headers["webhook-signature"]);
  const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
  expect(attempts.map((a) => [a.attemptNumber, a.trigger])).toEqual([
    [1, "initial"],
    [2, "replay"],
  ]);
  expect(deliverJobId(replay)).not.toBe(deliveryId);
});
