/**
 * States and transitions of an endpoint as the worker drives them: 410 disables at once, the
 * 50th consecutive failed attempt disables (not the 49th; a success resets), each e-mails the
 * world's administrators; a disabled endpoint receives nothing, and re-enabling brings no catch-up.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { drainJobId } from "@vw/queues";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness, type TestEndpoint } from "./harness.js";

let h: Harness;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  h = await startHarness({ retryDelays: [300], disableAfterFailures: 50, endpointConcurrency: 1 });
});
afterAll(async () => {
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(answer: number | "hang" = 204) {
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  return r;
}

/** Sends `n` deliveries to the endpoint and waits until all are finished; resolves with their statuses. */
async function deliverMany(endpoint: TestEndpoint, n: number, options: { test?: boolean } = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) ids.push(await h.seedDelivery(endpoint, options));
  return Promise.all(ids.map(async (id) => (await h.settled(endpoint.id, id, undefined, 60_000)).status));
}

/** Disables the endpoint as admin-api does (its pending deliveries skipped in the same transaction). */
async function disableManually(endpointId: string): Promise<void> {
  expect(await h.worker.db.endpoints.disable({ id: endpointId }, "manual")).not.toBeNull();
}

/** Waits until the endpoint has no drain job (woken, drained, done). */
async function drainEnded(endpointId: string): Promise<void> {
  await eventually(`the drain of ${endpointId} ended`, async () => (await h.deliveries.queueFor(endpointId).getJob(drainJobId(endpointId))) === undefined);
}

async function endpointRow(id: string) {
  return h.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } });
}

describe("410 Gone", () => {
  it("disables the endpoint at once, without retry or any other delivery, and e-mails the world's administrators", async () => {
    const world = await h.createWorld({ adminEmails: ["gone-admin@example.com", "second@example.com"] });
    const probe = await receiver(410);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const mailsBefore = h.smtp.messages.length;
    // Three due at once, one drain (window 1): the first answer says no more deliveries wanted.
    const ids = [];
    for (let i = 0; i < 3; i += 1) ids.push(await h.seedDelivery(endpoint, { wake: false }));
    await h.wake([endpoint.id]);
    const settled = await Promise.all(ids.map((id) => h.settled(endpoint.id, id)));
    expect(settled.map((d) => d.status)).toEqual(["failed", "skipped", "skipped"]);
    expect(probe.received.map((r) => r.headers["webhook-id"])).toEqual([ids[0]]);
    const row = await endpointRow(endpoint.id);
    expect(row).toMatchObject({ enabled: false, disabledReason: "gone" });
    expect(row.disabledAt).not.toBeNull();

    const [mail] = (await h.smtp.waitFor(mailsBefore + 1)).slice(mailsBefore);
    expect(mail!.to.sort()).toEqual(["gone-admin@example.com", "second@example.com"]);
    expect(mail!.subject).toContain("Webhook endpoint disabled");
    expect(mail!.text).toContain(probe.url);
    expect(mail!.text).toContain("410 Gone");
  });
});

describe("consecutive failures", () => {
  it("the 49th failure leaves the endpoint enabled and sends no mail; the 50th disables it and e-mails", async () => {
    const world = await h.createWorld({ adminEmails: ["fail-admin@example.com"] });
    const probe = await receiver(400);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    await deliverMany(endpoint, 49);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true, consecutiveFailures: 49 });
    expect(h.smtp.messages.filter((m) => m.to.includes("fail-admin@example.com"))).toHaveLength(0);

    const mailsBefore = h.smtp.messages.length;
    await deliverMany(endpoint, 1);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: false, disabledReason: "failures", consecutiveFailures: 50 });
    const mails = (await h.smtp.waitFor(mailsBefore + 1)).slice(mailsBefore);
    expect(mails.filter((m) => m.to.includes("fail-admin@example.com"))).toHaveLength(1);
    expect(mails[0]!.text).toContain("50 delivery attempts in a row failed");
  }, 60_000);

  it("a success in between resets the count", async () => {
    const world = await h.createWorld({ adminEmails: ["reset-admin@example.com"] });
    const probe = await receiver(400);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    await deliverMany(endpoint, 30);
    probe.answerWith(200);
    await deliverMany(endpoint, 1);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true, consecutiveFailures: 0 });
    probe.answerWith(400);
    await deliverMany(endpoint, 49);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true, consecutiveFailures: 49 });
    expect(h.smtp.messages.filter((m) => m.to.includes("reset-admin@example.com"))).toHaveLength(0);
  }, 60_000);

  it("Test deliveries do not count", async () => {
    const world = await h.createWorld();
    const probe = await receiver(500);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    // A 500 is retried for an ordinary delivery; a Test is sent once.
    expect(await deliverMany(endpoint, 1, { test: true })).toEqual(["failed"]);
    expect(probe.received).toHaveLength(1);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true, consecutiveFailures: 0 });
  });
});

describe("a disabled endpoint", () => {
  it("is not sent a delivery pending when it was disabled, nor its retry after re-enabling (no catch-up)", async () => {
    const world = await h.createWorld();
    // The receiver asks for the retry 5 s later: the disable comes while it waits.
    const probe = await receiver(204);
    probe.answerWith((_req, res) => {
      res.writeHead(503, { "retry-after": "5" });
      res.end();
    });
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const waitingRetry = await h.seedDelivery(endpoint);
    const waiting = await eventually("the first attempt is logged, its retry due later", async () => {
      const d = await h.delivery(endpoint.id, waitingRetry);
      return d !== null && d.attemptCount === 1 ? d : null;
    });
    expect(waiting).toMatchObject({ status: "pending", nextAttemptAt: expect.any(Date) });
    const queuedLater = await h.seedDelivery(endpoint, { wake: false });

    // Disabled as admin-api does: endpoint off, pending deliveries skipped, in one transaction.
    await disableManually(endpoint.id);
    await h.wake([endpoint.id]);
    await drainEnded(endpoint.id);
    expect((await h.delivery(endpoint.id, queuedLater))?.status).toBe("skipped");
    expect((await h.delivery(endpoint.id, waitingRetry))?.status).toBe("skipped");

    // Re-enabled before the retry was due; once it is due, a new delivery goes out alone: the
    // drain that claims it would have claimed the retry first, were it still pending.
    await h.worker.db.endpoints.enable({ id: endpoint.id, worldId: world.id });
    probe.answerWith(200);
    await eventually("the retry's time passed", () => Date.now() > waiting.nextAttemptAt!.getTime() + 100, { timeoutMs: 30_000 });
    const fresh = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, fresh)).status).toBe("delivered");
    expect(probe.received.map((r) => r.headers["webhook-id"])).toEqual([waitingRetry, fresh]);
    expect((await h.delivery(endpoint.id, waitingRetry))?.status).toBe("skipped");
    expect((await h.delivery(endpoint.id, queuedLater))?.status).toBe("skipped");
  });

  it("disabled while a delivery waits: the drain checks the endpoint before sending", async () => {
    const world = await h.createWorld();
    const probe = await receiver(204);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint, { wake: false });
    // Only the endpoint flag changes (a disable racing the claim): the delivery is still pending.
    await h.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    expect((await h.delivery(endpoint.id, deliveryId))?.status).toBe("pending");
    await h.wake([endpoint.id]);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("skipped");
    expect(probe.received).toHaveLength(0);
    expect(await h.prisma.deliveryAttempt.count({ where: { deliveryId } })).toBe(0);
  });

  it("deleted endpoints: a drain woken for one ends without sending", async () => {
    const world = await h.createWorld();
    const probe = await receiver(204);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint, { wake: false });
    await h.prisma.webhookEndpoint.delete({ where: { id: endpoint.id } });
    await h.wake([endpoint.id]);
    await drainEnded(endpoint.id);
    expect(await h.delivery(endpoint.id, deliveryId)).toBeNull();
    expect(probe.received).toHaveLength(0);
  });

  it("an endpoint deleted while its attempt is in flight: the other attempts answered with it are logged once, not sent again", async () => {
    const world = await h.createWorld();
    // The first three requests are held, then answered together, so their three attempts are
    // logged by one group commit; any later request (a resend) is answered at once.
    const held: import("node:http").ServerResponse[] = [];
    const probe = await receiver(204);
    probe.answerWith((_req, res) => {
      if (held.length < 3 && held.every((r) => !r.writableEnded)) held.push(res);
      else res.end();
    });
    const kept = [await h.createEndpoint(world.id, { url: probe.url }), await h.createEndpoint(world.id, { url: probe.url })];
    const gone = await h.createEndpoint(world.id, { url: probe.url });
    const keptIds = [await h.seedDelivery(kept[0]!), await h.seedDelivery(kept[1]!)];
    const goneId = await h.seedDelivery(gone);
    await probe.waitFor(3);
    await h.prisma.webhookEndpoint.delete({ where: { id: gone.id } });
    for (const res of held) {
      res.statusCode = 200;
      res.end("ok");
    }

    // Within less than a claim's lease: the batch committed the first time (a failed batch would
    // be sent again only once its claims expired).
    const settled = await Promise.all(keptIds.map((id, i) => h.settled(kept[i]!.id, id)));
    expect(settled.map((d) => [d.status, d.attemptCount])).toEqual([
      ["delivered", 1],
      ["delivered", 1],
    ]);
    expect(await h.delivery(gone.id, goneId)).toBeNull();
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId: { in: [...keptIds, goneId] } } });
    expect(attempts.map((a) => a.deliveryId).sort()).toEqual([...keptIds].sort());
    // Each delivery reached the receiver exactly once.
    expect(probe.received.map((r) => r.headers["webhook-id"]).sort()).toEqual([...keptIds, goneId].sort());
  });
});
