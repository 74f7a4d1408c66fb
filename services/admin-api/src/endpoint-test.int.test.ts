import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { EVENT_SAMPLES } from "@vw/contracts";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { PLAY_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { createCurrentEndpoint, createLegacyEndpoint, createWorld, deliveryRow, endpointRow } from "../test/delivery-fixtures.js";

/** Budget of a Test attempt in this file: enough for a loopback answer, short for the hanging receiver. */
const TIMEOUT_MS = 1500;

let api: AdminApiHarness;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "any", deliveryTimeoutMs: TIMEOUT_MS });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await api.close();
});

async function receiver(secret: string | null = null, answer: number | "hang" = 200): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver({ secret, answer });
  receivers.push(r);
  return r;
}

/** A current endpoint on a fresh receiver that verifies with the endpoint's secret. */
async function currentEndpointOnReceiver(subscriptions: string[] = ["recording"], answer: number | "hang" = 200) {
  const w = await createWorld(api);
  const r = await receiver(null, answer);
  const endpoint = await createCurrentEndpoint(api, w, r.url, subscriptions);
  r.setSecret(endpoint.secret);
  return { w, r, endpoint, test: `${w.endpoints}/${endpoint.id}/test` };
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe("POST .../endpoints/{id}/test on a current endpoint", () => {
  it("sends a signed ping envelope (data {}, test: true, the endpoint's apiVersion) and answers what the receiver did", async () => {
    const { w, r, endpoint, test } = await currentEndpointOnReceiver();
    // An apiVersion other than today's, so the envelope must take the endpoint's own.
    await api.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { apiVersion: "2025-02-03" } });
    const before = Date.now();

    const res = await api.request("POST", test);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      deliveryId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      type: "ping",
      status: 200,
      durationMs: expect.any(Number),
      responseBody: "ok",
      verdict: "delivered",
      error: null,
    });

    expect(r.received).toHaveLength(1);
    const [got] = r.received;
    expect(got!.verifyError).toBeNull();
    expect(got!.headers["webhook-id"]).toBe(res.body.deliveryId);
    expect(got!.headers["webhook-signature"]).toMatch(/^v1,/);
    expect(got!.verified).toEqual({
      deliveryId: res.body.deliveryId,
      apiVersion: "2025-02-03",
      type: "ping",
      timestamp: expect.stringMatching(ISO_INSTANT),
      world: { slug: w.world, url: `${PLAY_URL}/@/${w.org}/${w.world}` },
      data: {},
      test: true,
    });
    // The world's playUrl is the envelope's world.url, character for character.
    expect((await api.request("GET", `/admin/v1/worlds/${w.org}/${w.world}`)).body.playUrl).toBe(`${PLAY_URL}/@/${w.org}/${w.world}`);
    const timestamp = Date.parse((got!.verified as { timestamp: string }).timestamp);
    expect(timestamp).toBeGreaterThanOrEqual(before - 1000);
    expect(timestamp).toBeLessThanOrEqual(Date.now());

    // Stored as a finished test delivery with its one attempt, the body byte for byte as sent.
    const row = await deliveryRow(api, res.body.deliveryId);
    expect(row).toMatchObject({ endpointId: endpoint.id, worldId: w.worldId, type: "ping", test: true, status: "delivered", attemptCount: 1, lastStatus: 200, nextAttemptAt: null, eventId: null });
    expect(Buffer.from(row.body).equals(got!.body)).toBe(true);
    const attempts = await api.prisma.deliveryAttempt.findMany({ where: { deliveryId: row.id } });
    expect(attempts).toEqual([expect.objectContaining({ attemptNumber: 1, trigger: "test", verdict: "delivered", responseStatus: 200 })]);
  });

  it("takes no body, {} or {subscription} alike; the world URL is the custom domain when the world has one", async () => {
    const w = await createWorld(api, `${api.slug("d")}.example.com`);
    const r = await receiver();
    const endpoint = await createCurrentEndpoint(api, w, r.url, ["visitor"]);
    r.setSecret(endpoint.secret);
    const test = `${w.endpoints}/${endpoint.id}/test`;
    expect((await api.request("POST", test, { body: {} })).body.type).toBe("ping");
    expect((await api.request("POST", test, { body: { subscription: "visitor" } })).body.type).toBe("visitor.registered");
    const [ping, visitor] = await r.waitFor(2);
    for (const got of [ping!, visitor!]) {
      expect(got.verifyError).toBeNull();
      expect((got.verified as { world: unknown }).world).toEqual({ slug: "main", url: expect.stringMatching(/^https:\/\/t[0-9a-f]+-d-[0-9a-f]+\.example\.com\/$/) });
    }
  });

  it("sends the realistic sample of each of the endpoint's subscriptions", async () => {
    const { r, test } = await currentEndpointOnReceiver(["recording", "visitor", "consent", "analytics", "auth"]);
    const expected = {
      recording: "recording.completed",
      visitor: "visitor.registered",
      consent: "consent.changed",
      analytics: "analytics.batch",
      auth: "member.connecting",
    } as const;
    for (const [subscription, type] of Object.entries(expected)) {
      const res = await api.request("POST", test, { body: { subscription } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ type, verdict: "delivered" });
      const got = r.received.at(-1)!;
      expect(got.verifyError).toBeNull();
      // A current endpoint gets member.connecting in the envelope too, with the test marker.
      expect(got.verified).toMatchObject({ deliveryId: res.body.deliveryId, type, data: EVENT_SAMPLES[type], test: true });
      expect((await deliveryRow(api, res.body.deliveryId)).type).toBe(type);
    }
    expect(r.received).toHaveLength(5);
    expect(new Set(r.received.map((d) => d.headers["webhook-id"])).size).toBe(5);
  });
});

describe("POST .../endpoints/{id}/test on a legacy endpoint", () => {
  it("sends an unsigned envelope with a webhook-id when the endpoint never had a secret", async () => {
    const w = await createWorld(api);
    const r = await receiver(null);
    const endpoint = await createLegacyEndpoint(api, w, r.url);
    const res = await api.request("POST", `${w.endpoints}/${endpoint.id}/test`);
    expect(res.body).toMatchObject({ type: "ping", status: 200, verdict: "delivered" });
    const [got] = await r.waitFor(1);
    expect(got!.headers["webhook-id"]).toBe(res.body.deliveryId);
    expect(got!.headers["webhook-timestamp"]).toMatch(/^\d+$/);
    expect(got!.headers).not.toHaveProperty("webhook-signature");
    expect(JSON.parse(got!.body.toString("utf8"))).toMatchObject({ deliveryId: res.body.deliveryId, type: "ping", data: {}, test: true });
  });

  it("sends member.connecting as exactly the flat legacy body, without test marker, signed once a secret exists", async () => {
    const w = await createWorld(api);
    const r = await receiver(null);
    const endpoint = await createLegacyEndpoint(api, w, r.url);
    const test = `${w.endpoints}/${endpoint.id}/test`;
    const sample = EVENT_SAMPLES["member.connecting"];
    const legacyBody = JSON.stringify({ roomUrl: sample.roomUrl, uuid: sample.uuid, accessToken: sample.accessTokens[0]!.token, action: "auth" });

    const res = await api.request("POST", test, { body: { subscription: "auth" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ type: "member.connecting", verdict: "delivered" });
    const [unsigned] = await r.waitFor(1);
    expect(unsigned!.body.toString("utf8")).toBe(legacyBody);
    expect(unsigned!.headers["webhook-id"]).toBe(res.body.deliveryId);
    expect(unsigned!.headers).not.toHaveProperty("webhook-signature");
    expect((await deliveryRow(api, res.body.deliveryId)).test).toBe(true);

    const rotated = await api.request("POST", `${w.endpoints}/${endpoint.id}/rotate-secret`);
    r.setSecret(rotated.body.secret);
    const again = await api.request("POST", test, { body: { subscription: "auth" } });
    const [, signed] = await r.waitFor(2);
    expect(signed!.verifyError).toBeNull();
    expect(signed!.body.toString("utf8")).toBe(legacyBody);
    expect(signed!.headers["webhook-id"]).toBe(again.body.deliveryId);
  });
});

describe("Test leaves the endpoint's state alone", () => {
  it.each([410, 500])("works on a disabled endpoint answered %i: state, reason, time and failure count unchanged", async (answer) => {
    const { r, endpoint, w, test } = await currentEndpointOnReceiver(["recording"], answer);
    expect((await api.request("POST", `${w.endpoints}/${endpoint.id}/disable`)).status).toBe(200);
    await api.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { consecutiveFailures: 7 } });
    const before = await endpointRow(api, endpoint.id);

    const res = await api.request("POST", test, { body: { subscription: "recording" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ type: "recording.completed", status: answer, verdict: answer === 410 ? "gone" : "retry", responseBody: "ok" });
    expect(r.received).toHaveLength(1);
    expect(r.received[0]!.verifyError).toBeNull();

    const after = await endpointRow(api, endpoint.id);
    expect(after).toMatchObject({ enabled: false, disabledReason: "manual", disabledAt: before.disabledAt, consecutiveFailures: 7, updatedAt: before.updatedAt });
    // One attempt only, never retried: the delivery is finished, failed.
    expect(await deliveryRow(api, res.body.deliveryId)).toMatchObject({ status: "failed", attemptCount: 1, lastStatus: answer, nextAttemptAt: null });
    expect(await api.deliveryQueue.getJobs(["waiting", "delayed"])).toEqual([]);
  });

  it("does not disable an enabled endpoint on 410 nor count a 500 as a failure", async () => {
    const { endpoint, r, test } = await currentEndpointOnReceiver(["recording"], 410);
    await api.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { consecutiveFailures: 3 } });
    expect((await api.request("POST", test)).body).toMatchObject({ status: 410, verdict: "gone" });
    r.answerWith(500);
    expect((await api.request("POST", test)).body).toMatchObject({ status: 500, verdict: "retry" });
    expect(await endpointRow(api, endpoint.id)).toMatchObject({ enabled: true, disabledReason: null, disabledAt: null, consecutiveFailures: 3 });
  });

  it("reports a receiver that does not answer in time as a failed test with no status", async () => {
    const { endpoint, test } = await currentEndpointOnReceiver(["recording"], "hang");
    const res = await api.request("POST", test);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: null, responseBody: null, verdict: "retry", error: expect.any(String) });
    expect(res.body.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
    expect(await deliveryRow(api, res.body.deliveryId)).toMatchObject({ status: "failed", lastStatus: null, attemptCount: 1 });
    expect((await endpointRow(api, endpoint.id)).consecutiveFailures).toBe(0);
  });
});

describe("POST .../endpoints/{id}/test refusals", () => {
  it("answers 400 at /subscription for a subscription the endpoint lacks or that does not exist, sending nothing", async () => {
    const { endpoint, r, test } = await currentEndpointOnReceiver(["recording", "consent"]);
    for (const subscription of ["visitor", "auth", "bogus"]) {
      const res = await api.request("POST", test, { body: { subscription } });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors).toEqual([{ pointer: "/subscription", detail: expect.any(String) }]);
    }
    expect((await api.request("POST", test, { body: { subscription: "visitor" } })).body.errors[0].detail).toMatch(/recording, consent/);
    const extra = await api.request("POST", test, { body: { subscription: "recording", extra: 1 } });
    expectProblem(extra, 400, "invalid-request");
    expect(extra.body.errors).toEqual([{ pointer: "/extra", detail: expect.any(String) }]);
    expect(r.received).toHaveLength(0);
    expect(await api.prisma.webhookDelivery.count({ where: { endpointId: endpoint.id } })).toBe(0);
  });

  it("answers 404 for an unknown, malformed or foreign endpoint id and 405 for other methods", async () => {
    const { endpoint } = await currentEndpointOnReceiver();
    const other = await createWorld(api);
    expectProblem(await api.request("POST", `${other.endpoints}/${endpoint.id}/test`), 404, "not-found");
    expectProblem(await api.request("POST", `${other.endpoints}/00000000-0000-4000-8000-000000000000/test`), 404, "not-found");
    expectProblem(await api.request("POST", `${other.endpoints}/not-a-uuid/test`), 404, "not-found");
    const get = await api.request("GET", `${other.endpoints}/${endpoint.id}/test`);
    expectProblem(get, 405, "method-not-allowed");
    expect(get.headers.get("allow")).toBe("POST");
  });
});
