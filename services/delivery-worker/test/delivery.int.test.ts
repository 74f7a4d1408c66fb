/**
 * The delivery rules of the spec, end to end through the real queue, database and HTTP:
 * signing, byte-identical retries, the retry schedule with its jitter bound, the reaction table,
 * and the attempt log.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, startWebhookReceiver, verificationError, type WebhookReceiver } from "@vw/testing";
import { generateSecret } from "@vw/webhook-core";
import { startHarness, type Harness } from "./harness.js";

const DELAYS = [150, 300, 450];
let h: Harness;
const receivers: WebhookReceiver[] = [];

async function receiver(secret: string | null, answer: Parameters<typeof startWebhookReceiver>[0] extends infer O ? O extends { answer?: infer A } ? A : never : never = 204) {
  const r = await startWebhookReceiver({ secret, answer });
  receivers.push(r);
  return r;
}

beforeAll(async () => {
  // random() = 0.999…: every delay gets (almost) its full +10% jitter, so the upper bound is exercised.
  h = await startHarness({ retryDelays: DELAYS, random: () => 0.9999 });
});
afterAll(async () => {
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function attemptsOf(deliveryId: string) {
  return h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
}

describe("a delivery answered 2xx", () => {
  it("is signed per Standard Webhooks, sent once, logged and marked delivered", async () => {
    const world = await h.createWorld();
    const probe = await receiver(null, 200);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");

    expect(probe.received).toHaveLength(1);
    const [request] = probe.received;
    expect(request!.verifyError).toBeNull();
    expect(request!.headers["webhook-id"]).toBe(deliveryId);
    expect(request!.headers["content-type"]).toBe("application/json");
    expect((request!.verified as { deliveryId: string }).deliveryId).toBe(deliveryId);
    const stored = await h.prisma.webhookDelivery.findFirstOrThrow({ where: { id: deliveryId } });
    expect(Buffer.from(stored.body).equals(request!.body)).toBe(true);
    expect(await h.delivery(endpoint.id, deliveryId)).toMatchObject({ status: "delivered", attemptCount: 1, lastStatus: 200, nextAttemptAt: null });
    const [attempt] = await attemptsOf(deliveryId);
    expect(attempt).toMatchObject({ attemptNumber: 1, trigger: "initial", responseStatus: 200, verdict: "delivered", responseBody: "ok" });
    expect((attempt!.requestHeaders as Record<string, string>)["webhook-signature"]).toBe(request!.headers["webhook-signature"]);
  });
});

describe("retries", () => {
  it("resend byte-identical bodies with the same webhook-id on the schedule, each delay within +10%", async () => {
    const world = await h.createWorld();
    let calls = 0;
    const probe = await receiver(null, (_req, res) => {
      calls += 1;
      res.statusCode = calls <= 3 ? [500, 429, 408][calls - 1]! : 200;
      res.end(`answer ${calls}`);
    });
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");

    expect(probe.received).toHaveLength(4);
    for (const request of probe.received) {
      expect(request.verifyError).toBeNull();
      expect(request.headers["webhook-id"]).toBe(deliveryId);
      expect(request.body.equals(probe.received[0]!.body)).toBe(true);
    }
    const attempts = await attemptsOf(deliveryId);
    expect(attempts.map((a) => [a.attemptNumber, a.trigger, a.responseStatus, a.verdict])).toEqual([
      [1, "initial", 500, "retry"],
      [2, "retry", 429, "retry"],
      [3, "retry", 408, "retry"],
      [4, "retry", 200, "delivered"],
    ]);
    // Each retry started no earlier than its delay after the previous attempt ended, and the
    // scheduled delay never exceeded the delay + 10%.
    for (let i = 1; i < attempts.length; i += 1) {
      const previous = attempts[i - 1]!;
      const previousEnd = previous.startedAt.getTime() + previous.durationMs;
      const gap = attempts[i]!.startedAt.getTime() - previousEnd;
      expect(gap).toBeGreaterThanOrEqual(DELAYS[i - 1]! - 5);
    }
  });

  it("records the scheduled next attempt within [delay, delay × 1.1]", async () => {
    const world = await h.createWorld();
    const probe = await receiver(null, 503);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    await probe.waitFor(1);
    // The first attempt and its delivery's schedule are committed together.
    const row = await eventually("the first attempt logged", async () => {
      const found = await h.delivery(endpoint.id, deliveryId);
      return found !== null && found.attemptCount >= 1 ? found : null;
    });
    const [first] = await attemptsOf(deliveryId);
    expect(row.nextAttemptAt).not.toBeNull();
    const scheduled = row.nextAttemptAt!.getTime() - (first!.startedAt.getTime() + first!.durationMs);
    expect(scheduled).toBeGreaterThanOrEqual(DELAYS[0]! - 5);
    expect(scheduled).toBeLessThanOrEqual(DELAYS[0]! * 1.1 + 20);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
  });

  it("stop after the last delay: 1 + retries attempts, then failed", async () => {
    const world = await h.createWorld();
    const probe = await receiver(null, 503);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
    expect(probe.received).toHaveLength(DELAYS.length + 1);
    expect(await h.delivery(endpoint.id, deliveryId)).toMatchObject({ status: "failed", attemptCount: DELAYS.length + 1, lastStatus: 503, nextAttemptAt: null });
  });

  it("retry a connection error (nothing listening)", async () => {
    const world = await h.createWorld();
    const probe = await receiver(null);
    const url = probe.url;
    await probe.close();
    receivers.splice(receivers.indexOf(probe), 1);
    const endpoint = await h.createEndpoint(world.id, { url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
    const attempts = await attemptsOf(deliveryId);
    expect(attempts).toHaveLength(DELAYS.length + 1);
    expect(attempts.every((a) => a.errorKind === "connection" && a.verdict === "retry")).toBe(true);
  });

  it("are signed with the secret current at each attempt (a rotation applies to the next retry)", async () => {
    const world = await h.createWorld();
    let calls = 0;
    const probe = await receiver(null, (_req, res) => {
      calls += 1;
      res.statusCode = calls === 1 ? 500 : 200;
      res.end();
    });
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    probe.setSecret(endpoint.secret);
    const deliveryId = await h.seedDelivery(endpoint);
    await probe.waitFor(1);
    expect(probe.received[0]!.verifyError).toBeNull();
    // Rotate as admin-api does: new sealed secret, version bumped.
    const rotated = generateSecret();
    await h.prisma.webhookEndpoint.update({
      where: { id: endpoint.id },
      data: { secretSealed: h.secretBox.seal(rotated), secretVersion: { increment: 1 }, secretRotatedAt: new Date() },
    });
    probe.setSecret(rotated);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    expect(probe.received).toHaveLength(2);
    expect(probe.received[1]!.verifyError).toBeNull();
    probe.setSecret(endpoint.secret);
    // The old secret no longer verifies the retry.
    expect(verificationError(endpoint.secret!, probe.received[1]!)).toBe("No matching signature found");
  });
});

describe("answers that are not retried", () => {
  it.each([400, 401, 404, 422])("%i: one attempt, failed, endpoint still enabled", async (status) => {
    const world = await h.createWorld();
    const probe = await receiver(null, status);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
    expect(probe.received).toHaveLength(1);
    const attempts = await attemptsOf(deliveryId);
    expect(attempts.map((a) => a.verdict)).toEqual(["rejected"]);
    const row = await h.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: endpoint.id } });
    expect(row).toMatchObject({ enabled: true, consecutiveFailures: 1 });
  });

  it("a redirect is not followed", async () => {
    const world = await h.createWorld();
    const target = await receiver(null);
    const probe = await receiver(null, (_req, res) => {
      res.writeHead(302, { location: target.url });
      res.end();
    });
    const endpoint = await h.createEndpoint(world.id, { url: probe.url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
    expect(target.received).toHaveLength(0);
    const [attempt] = await attemptsOf(deliveryId);
    expect(attempt).toMatchObject({ responseStatus: 302, errorKind: "redirect", verdict: "rejected" });
  });
});

describe("legacy endpoints", () => {
  it("without a secret get no signature header but still a webhook-id", async () => {
    const world = await h.createWorld();
    const probe = await receiver(null);
    const endpoint = await h.createEndpoint(world.id, { url: probe.url, format: "legacy", withSecret: false });
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("delivered");
    expect(probe.received[0]!.headers["webhook-signature"]).toBeUndefined();
    expect(probe.received[0]!.headers["webhook-id"]).toBe(deliveryId);
  });
});
