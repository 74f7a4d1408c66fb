import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { validateDelivered, validateLegacyAuthBody } from "@vw/contracts";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { generateSecret } from "@vw/webhook-core";
import { deliveriesWhere } from "./delivery-rows.js";
import { PLAY_URL, startHookHarness, type HookHarness } from "./auth-hook-harness.js";

const TIMEOUT_MS = 500;
const ROOM_URL = `${PLAY_URL}/@/acme/hq/lobby.wam`;
const UUID = "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b";

let h: HookHarness;
const receivers: WebhookReceiver[] = [];

async function receiver(options: Parameters<typeof startWebhookReceiver>[0] = {}): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver(options);
  receivers.push(r);
  return r;
}

const hookBody = (world: string, accessTokens: { provider: string; token: string }[] = []) => ({ world, roomUrl: ROOM_URL, uuid: UUID, accessTokens });

beforeAll(async () => {
  h = await startHookHarness({ timeoutMs: TIMEOUT_MS });
});

afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

afterAll(async () => {
  await h?.close();
});

describe("POST /v1/auth-hook: requests", () => {
  it("needs the ingest token (401 with WWW-Authenticate) and calls nothing without it", async () => {
    const r = await receiver();
    const world = await h.createWorld();
    await h.createEndpoint(world, { url: r.url, secret: generateSecret() });
    const missing = await h.post(hookBody(world.ref), null);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toMatch(/^Bearer /);
    expect((await h.post(hookBody(world.ref), "wrong-token-0123456789")).status).toBe(401);
    expect(r.received).toHaveLength(0);
  });

  it("refuses an invalid body with a pointer per invalid member, and an unknown world with 404", async () => {
    const res = await h.post({ world: "no-slash", roomUrl: "not a url", accessTokens: [{ provider: "x" }], extra: 1 });
    expect(res.status).toBe(400);
    const pointers = (res.body.errors as { pointer: string }[]).map((e) => e.pointer).sort();
    expect(pointers).toEqual(["/accessTokens/0/token", "/extra", "/roomUrl", "/uuid", "/world"]);

    const unknown = await h.post(hookBody("nobody-here/nothing-here"));
    expect(unknown.status).toBe(404);
    expect(unknown.body.errors).toEqual([{ pointer: "/world", detail: "names no known world" }]);
  });

  it("answers 200 with no results for a world without auth endpoints", async () => {
    const world = await h.createWorld();
    const res = await h.post(hookBody(world.ref));
    expect(res).toMatchObject({ status: 200, body: { results: [] } });
  });
});

describe("POST /v1/auth-hook: delivery", () => {
  it("takes an anonymous member without accessTokens as one with [] (the receiver gets accessTokens: [])", async () => {
    const secret = generateSecret();
    const r = await receiver({ secret });
    const world = await h.createWorld();
    await h.createEndpoint(world, { url: r.url, secret });
    const { accessTokens: _omitted, ...anonymous } = hookBody(world.ref);
    const res = await h.post(anonymous);
    expect(res.status).toBe(200);
    expect(res.body.results).toHaveLength(1);
    const [got] = await r.waitFor(1);
    expect((got!.verified as { data: { accessTokens: unknown } }).data.accessTokens).toEqual([]);
    expect((await h.post({ ...anonymous, accessTokens: null })).status).toBe(400);
  });

  it("calls the endpoints one after another in creation order; once a hung one has used the budget, the others are called after the answer, in order", async () => {
    const secrets = [generateSecret(), generateSecret(), generateSecret()];
    const hung = await receiver({ secret: secrets[0]!, answer: "hang" });
    const second = await receiver({ secret: secrets[1]! });
    const third = await receiver({ secret: secrets[2]! });
    const world = await h.createWorld([{ id: "acme-okta", kind: "openid-connect", exposeAccessToken: true }]);
    const t0 = Date.now() - 60_000;
    // Inserted in the reverse of their creation order: the order must come from createdAt, not from insertion.
    const id3 = await h.createEndpoint(world, { url: third.url, secret: secrets[2]!, createdAt: new Date(t0 + 2000) });
    const id2 = await h.createEndpoint(world, { url: second.url, secret: secrets[1]!, createdAt: new Date(t0 + 1000) });
    const id1 = await h.createEndpoint(world, { url: hung.url, secret: secrets[0]!, createdAt: new Date(t0) });

    const res = await h.post(hookBody(world.ref, [{ provider: "acme-okta", token: "tok-okta" }]));
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: { endpointId: string }) => r.endpointId)).toEqual([id1, id2, id3]);
    expect(res.body.results[0]).toMatchObject({ endpointId: id1, status: null, error: "timeout" });
    // The hung endpoint took the whole budget: the others were not called before the answer.
    expect(res.body.results[1]).toEqual({ endpointId: id2, status: null, durationMs: 0, error: "not-reached" });
    expect(res.body.results[2]).toEqual({ endpointId: id3, status: null, durationMs: 0, error: "not-reached" });

    // They are called afterwards, still one after another in creation order.
    const [r2] = await second.waitFor(1);
    const [r3] = await third.waitFor(1);
    const [h1] = hung.received;
    expect(r2!.at).toBeGreaterThanOrEqual(h1!.at);
    expect(r3!.at).toBeGreaterThanOrEqual(r2!.at);
    for (const got of [h1!, r2!, r3!]) {
      expect(got.verifyError).toBeNull();
      const body = JSON.parse(got.body.toString("utf8"));
      expect(validateDelivered("member.connecting", body)).toMatchObject({ ok: true });
      expect(body).toMatchObject({
        type: "member.connecting",
        world: { slug: world.slug, url: `${PLAY_URL}/@/${world.ref}` },
        data: { roomUrl: ROOM_URL, uuid: UUID, accessTokens: [{ provider: "acme-okta", token: "tok-okta" }] },
      });
      expect(body).not.toHaveProperty("test");
      expect(got.headers["webhook-id"]).toBe(body.deliveryId);
    }
  });

  it("never sends tokens of generic logins or of providers that do not expose them, whatever the caller passes", async () => {
    const secret = generateSecret();
    const r = await receiver({ secret });
    const world = await h.createWorld([
      { id: "google", kind: "google", exposeAccessToken: true },
      { id: "acme-okta", kind: "openid-connect", exposeAccessToken: true },
      { id: "partner-sso", kind: "openid-connect", exposeAccessToken: false },
    ]);
    await h.createEndpoint(world, { url: r.url, secret });
    const res = await h.post(
      hookBody(world.ref, [
        { provider: "google", token: "tok-google" },
        { provider: "partner-sso", token: "tok-partner" },
        { provider: "github", token: "tok-github" },
        { provider: "acme-okta", token: "tok-okta" },
      ]),
    );
    expect(res.status).toBe(200);
    const [got] = await r.waitFor(1);
    expect((got!.verified as { data: { accessTokens: unknown } }).data.accessTokens).toEqual([{ provider: "acme-okta", token: "tok-okta" }]);
    const raw = got!.body.toString("utf8");
    for (const leaked of ["tok-google", "tok-partner", "tok-github"]) expect(raw).not.toContain(leaked);
  });

  it("sends the exact legacy body to a legacy endpoint without a secret: webhook-id header, no signature", async () => {
    const r = await receiver({ secret: null });
    const world = await h.createWorld([
      { id: "google", kind: "google", exposeAccessToken: true },
      { id: "acme-okta", kind: "openid-connect", exposeAccessToken: true },
    ]);
    await h.createEndpoint(world, { url: r.url, secret: null, format: "legacy" });

    await h.post(hookBody(world.ref, [{ provider: "google", token: "tok-google" }, { provider: "acme-okta", token: "tok-okta" }]));
    await h.post(hookBody(world.ref, [{ provider: "google", token: "tok-google" }]));
    const [first, second] = await r.waitFor(2);
    expect(first!.body.toString("utf8")).toBe(JSON.stringify({ roomUrl: ROOM_URL, uuid: UUID, accessToken: "tok-okta", action: "auth" }));
    expect(second!.body.toString("utf8")).toBe(JSON.stringify({ roomUrl: ROOM_URL, uuid: UUID, accessToken: null, action: "auth" }));
    expect(validateLegacyAuthBody(JSON.parse(first!.body.toString("utf8")))).toMatchObject({ ok: true });
    for (const got of [first!, second!]) {
      expect(got.headers["webhook-id"]).toMatch(/^[0-9a-f-]{36}$/);
      expect(got.headers["webhook-timestamp"]).toMatch(/^\d+$/);
      expect(got.headers["webhook-signature"]).toBeUndefined();
    }
  });

  it("signs the legacy body when the legacy endpoint has a secret", async () => {
    const secret = generateSecret();
    const r = await receiver({ secret });
    const world = await h.createWorld();
    await h.createEndpoint(world, { url: r.url, secret, format: "legacy" });
    await h.post(hookBody(world.ref));
    const [got] = await r.waitFor(1);
    expect(got!.verifyError).toBeNull();
    expect(got!.verified).toEqual({ roomUrl: ROOM_URL, uuid: UUID, accessToken: null, action: "auth" });
  });

  it("410 and 500 answers are reported but never disable the endpoint nor count as failures, and are not retried", async () => {
    const gone = await receiver({ answer: 410 });
    const broken = await receiver({ answer: 500 });
    const world = await h.createWorld();
    const goneId = await h.createEndpoint(world, { url: gone.url, secret: generateSecret() });
    const brokenId = await h.createEndpoint(world, { url: broken.url, secret: generateSecret() });
    const res = await h.post(hookBody(world.ref));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { endpointId: goneId, status: 410, durationMs: expect.any(Number) },
      { endpointId: brokenId, status: 500, durationMs: expect.any(Number) },
    ]);
    await h.hook.drain();
    const rows = await h.prisma.webhookEndpoint.findMany({ where: { id: { in: [goneId, brokenId] } } });
    for (const row of rows) expect(row).toMatchObject({ enabled: true, consecutiveFailures: 0, disabledReason: null });
    expect(gone.received).toHaveLength(1);
    expect(broken.received).toHaveLength(1);
  });

  it("leaves out disabled endpoints and endpoints not subscribed to auth", async () => {
    const secret = generateSecret();
    const subscribed = await receiver({ secret });
    const disabled = await receiver({ secret });
    const notAuth = await receiver({ secret });
    const otherWorld = await receiver({ secret });
    const world = await h.createWorld();
    const other = await h.createWorld();
    const id = await h.createEndpoint(world, { url: subscribed.url, secret, subscriptions: ["visitor", "auth"] });
    await h.createEndpoint(world, { url: disabled.url, secret, enabled: false });
    await h.createEndpoint(world, { url: notAuth.url, secret, subscriptions: ["visitor", "consent", "recording", "analytics"] });
    await h.createEndpoint(other, { url: otherWorld.url, secret });
    const res = await h.post(hookBody(world.ref));
    expect(res.body.results).toEqual([{ endpointId: id, status: 204, durationMs: expect.any(Number) }]);
    expect(subscribed.received).toHaveLength(1);
    expect(disabled.received).toHaveLength(0);
    expect(notAuth.received).toHaveLength(0);
    expect(otherWorld.received).toHaveLength(0);
  });

  it("records each call in the delivery history: a finished delivery and one attempt with trigger hook", async () => {
    const secret = generateSecret();
    const ok = await receiver({ secret });
    const hung = await receiver({ secret, answer: "hang" });
    const world = await h.createWorld();
    const okId = await h.createEndpoint(world, { url: ok.url, secret, createdAt: new Date(Date.now() - 2000) });
    const hungId = await h.createEndpoint(world, { url: hung.url, secret, createdAt: new Date(Date.now() - 1000) });
    await h.post(hookBody(world.ref));
    await h.hook.drain();

    const deliveries = await deliveriesWhere(h.prisma, { worldId: world.id });
    expect(deliveries).toHaveLength(2);
    const delivered = deliveries.find((d) => d.endpointId === okId)!;
    const failed = deliveries.find((d) => d.endpointId === hungId)!;
    expect(delivered).toMatchObject({ type: "member.connecting", status: "delivered", attemptCount: 1, lastStatus: 204, test: false, eventId: null, nextAttemptAt: null });
    expect(failed).toMatchObject({ type: "member.connecting", status: "failed", attemptCount: 1, lastStatus: null, test: false });
    // Delivered: no state row; failed: a final one, never due (no drain retries a hook call).
    expect(delivered.state).toBeNull();
    expect(failed.state).toMatchObject({ status: "failed", dueAt: null, claimedUntil: null });
    // The stored body is byte for byte what the receiver got, and its deliveryId is the row's.
    expect(Buffer.from(delivered.body).equals(ok.received[0]!.body)).toBe(true);
    expect(JSON.parse(Buffer.from(delivered.body).toString("utf8")).deliveryId).toBe(delivered.id);
    expect(delivered.attempts).toHaveLength(1);
    expect(delivered.attempts[0]).toMatchObject({ attemptNumber: 1, trigger: "hook", responseStatus: 204, verdict: "delivered", errorKind: null });
    expect((delivered.attempts[0]!.requestHeaders as Record<string, string>)["webhook-id"]).toBe(delivered.id);
    expect(failed.attempts).toHaveLength(1);
    expect(failed.attempts[0]).toMatchObject({ attemptNumber: 1, trigger: "hook", responseStatus: null, responseHeaders: null, errorKind: "timeout", verdict: "retry" });
  });

  it("writes the history of calls answered within one window together, across worlds; an endpoint deleted meanwhile drops only its own rows", async () => {
    // A window far longer than the test: only drain() writes, so all four calls share one write.
    const slow = await startHookHarness({ timeoutMs: 2000, historyFlushMs: 600_000 });
    try {
      const secret = generateSecret();
      const r = await receiver({ secret });
      const first = await slow.createWorld();
      const second = await slow.createWorld();
      const doomedWorld = await slow.createWorld();
      const keptId = await slow.createEndpoint(first, { url: r.url, secret });
      const otherId = await slow.createEndpoint(second, { url: r.url, secret });
      const doomedId = await slow.createEndpoint(doomedWorld, { url: r.url, secret });
      const ids = [keptId, otherId, doomedId];
      for (const world of [first, second, doomedWorld, first]) expect((await slow.post(hookBody(world.ref))).status).toBe(200);
      expect(r.received).toHaveLength(4);
      expect(await slow.prisma.webhookDelivery.count({ where: { endpointId: { in: ids } } })).toBe(0);
      await slow.prisma.webhookEndpoint.delete({ where: { id: doomedId } });
      await slow.hook.drain();

      expect(slow.logs.filter((l) => l.level === "error")).toEqual([]);
      const rows = await deliveriesWhere(slow.prisma, { endpointId: { in: ids } });
      expect(rows.map((d) => d.endpointId).sort()).toEqual([keptId, keptId, otherId].sort());
      expect(rows.find((d) => d.endpointId === otherId)!.worldId).toBe(second.id);
      for (const d of rows) expect(d.attempts).toMatchObject([{ trigger: "hook", responseStatus: 204 }]);
    } finally {
      await slow.close();
    }
  });
});
