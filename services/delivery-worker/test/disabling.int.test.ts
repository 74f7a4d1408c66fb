/**
 * States and transitions of an endpoint as the worker drives them: 410 disables at once, the
 * 50th consecutive failed attempt disables (not the 49th; a success resets), each e-mails the
 * world's administrators; a disabled endpoint receives nothing, and re-enabling brings no catch-up.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
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

/** Sends `n` deliveries to the endpoint and waits until all are finished. */
async function deliverMany(endpoint: TestEndpoint, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) ids.push(await h.seedDelivery(endpoint));
  return Promise.all(ids.map((id) => h.completion(id)));
}

async function endpointRow(id: string) {
  return h.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } });
}

describe("410 Gone", () => {
  it("disables the endpoint at once, without retry, and e-mails the world's administrators", async () => {
    const world = await h.createWorld({ adminEmails: ["gone-admin@example.com", "second@example.com"] });
    const probe = await receiver(410);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const mailsBefore = h.smtp.messages.length;
    const deliveryId = await h.seedDelivery(endpoint);
    expect(await h.completion(deliveryId)).toBe("failed");
    expect(probe.received).toHaveLength(1);
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
    const id = await h.seedDelivery(endpoint, { test: true });
    expect(await h.completion(id)).toBe("failed");
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true, consecutiveFailures: 0 });
  });
});

describe("a disabled endpoint", () => {
  it("is not sent a delivery queued before it was disabled, nor its retry after re-enabling (no catch-up)", async () => {
    const world = await h.createWorld();
    const probe = await receiver(503);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const waitingRetry = await h.seedDelivery(endpoint);
    await probe.waitFor(1);
    const queuedLater = await h.seedDelivery(endpoint, { enqueue: false });

    // Disable as admin-api does: endpoint off, waiting deliveries skipped, in one transaction.
    await h.prisma.$transaction([
      h.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } }),
      h.prisma.webhookDelivery.updateMany({ where: { endpointId: endpoint.id, status: "pending" }, data: { status: "skipped", nextAttemptAt: null } }),
    ]);
    await h.enqueue([{ deliveryId: queuedLater, endpointId: endpoint.id, run: 0 }]);
    expect(await h.completion(queuedLater)).toBe("skipped");

    // Re-enable before the first delivery's retry is due: it was skipped, so it stays unsent.
    await h.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { enabled: true, disabledReason: null, disabledAt: null } });
    probe.answerWith(200);
    expect(await h.completion(waitingRetry)).toBe("skipped");
    expect(probe.received).toHaveLength(1);
    const rows = await h.prisma.webhookDelivery.findMany({ where: { endpointId: endpoint.id }, orderBy: { createdAt: "asc" } });
    expect(rows.map((r) => r.status)).toEqual(["skipped", "skipped"]);
  });

  it("disabled while a delivery waits: the worker checks the endpoint before sending", async () => {
    const world = await h.createWorld();
    const probe = await receiver(204);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint, { enqueue: false });
    // Only the endpoint flag changes (a disable racing the job): the delivery is still pending.
    await h.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    await h.enqueue([{ deliveryId, endpointId: endpoint.id, run: 0 }]);
    expect(await h.completion(deliveryId)).toBe("skipped");
    expect(probe.received).toHaveLength(0);
    expect((await h.prisma.webhookDelivery.findFirstOrThrow({ where: { id: deliveryId } })).status).toBe("skipped");
  });

  it("deleted endpoints: their queued jobs finish without sending", async () => {
    const world = await h.createWorld();
    const probe = await receiver(204);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint, { enqueue: false });
    await h.prisma.webhookEndpoint.delete({ where: { id: endpoint.id } });
    await h.enqueue([{ deliveryId, endpointId: endpoint.id, run: 0 }]);
    expect(await h.completion(deliveryId)).toBe("missing");
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

    expect(await Promise.all([...keptIds, goneId].map((id) => h.completion(id)))).toEqual(["delivered", "delivered", "delivered"]);
    const rows = await h.prisma.webhookDelivery.findMany({ where: { id: { in: [...keptIds, goneId] } } });
    expect(rows.map((r) => [r.id, r.status, r.attemptCount]).sort()).toEqual(keptIds.map((id) => [id, "delivered", 1]).sort());
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId: { in: [...keptIds, goneId] } } });
    expect(attempts.map((a) => a.deliveryId).sort()).toEqual([...keptIds].sort());
    // Each delivery reached the receiver exactly once: the batch was not failed and sent again.
    expect(probe.received.map((r) => r.headers["webhook-id"]).sort()).toEqual([...keptIds, goneId].sort());
  });
});
