/**
 * The auth hook's world-settings cache against the real PostgreSQL: repeated calls are served
 * from memory, and every change made by another writer (admin-api, the worker's disabler, plain
 * SQL) is seen by the next call once its notification has arrived; with its LISTEN connection
 * gone the cache steps aside until it is back.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { generateSecret } from "@vw/webhook-core";
import { PLAY_URL, startHookHarness, type HookHarness } from "./auth-hook-harness.js";

let h: HookHarness;
const receivers: WebhookReceiver[] = [];
const hookBody = (world: string, accessTokens: { provider: string; token: string }[] = []) => ({
  world,
  roomUrl: `${PLAY_URL}/@/acme/hq/lobby.wam`,
  uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b",
  accessTokens,
});

async function receiver(): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver({ answer: 204 });
  receivers.push(r);
  return r;
}

/** Runs `change` and waits for the invalidation it causes (the cache drops the world's entry). */
async function changeAndWait(world: string, change: () => Promise<unknown>): Promise<void> {
  await change();
  // A notification is asynchronous.
  await eventually(`the change notification for ${world} dropped its cache entry`, () => !h.cache!.has(world), { timeoutMs: 10_000 });
}

const sentTokens = (r: WebhookReceiver, i: number): unknown => JSON.parse(r.received[i]!.body.toString("utf8")).data.accessTokens;

const calledEndpoints = async (world: string): Promise<string[]> => {
  const res = await h.post(hookBody(world, [{ provider: "acme-okta", token: "tok" }]));
  expect(res.status).toBe(200);
  return (res.body.results as { endpointId: string }[]).map((r) => r.endpointId);
};

/**
 * Calls the hook until one call is served from the cache; returns how many calls that took
 * (MAX_CALLS when none was). Other test files share the database and their changes notify too,
 * and a read in flight during any notification is not stored, so the first fill may be refused.
 */
const MAX_CALLS = 50;
async function callsUntilHit(world: string, expected: string[]): Promise<number> {
  for (let calls = 1; calls < MAX_CALLS; calls += 1) {
    const hits = h.cache!.hits;
    expect(await calledEndpoints(world)).toEqual(expected);
    if (h.cache!.hits > hits) return calls;
  }
  return MAX_CALLS;
}

beforeAll(async () => {
  h = await startHookHarness({ timeoutMs: 1000, cache: true });
  await eventually("the listener is active", () => h.cache!.isActive, { timeoutMs: 10_000 });
});

afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

afterAll(async () => {
  await h?.close();
});

describe("auth hook world-settings cache", () => {
  it("serves repeated calls from memory", async () => {
    const r = await receiver();
    const world = await h.createWorld();
    const id = await h.createEndpoint(world, { url: r.url, secret: generateSecret() });
    expect(await callsUntilHit(world.ref, [id])).toBeLessThan(MAX_CALLS);
    expect(h.cache!.has(world.ref)).toBe(true);
  });

  it("sees endpoints disabled, added, edited and deleted by other writers", async () => {
    const first = await receiver();
    const second = await receiver();
    const world = await h.createWorld();
    const a = await h.createEndpoint(world, { url: first.url, secret: generateSecret(), createdAt: new Date(Date.now() - 5000) });
    expect(await calledEndpoints(world.ref)).toEqual([a]);

    let b = "";
    await changeAndWait(world.ref, async () => (b = await h.createEndpoint(world, { url: second.url, secret: generateSecret() })));
    expect(await calledEndpoints(world.ref)).toEqual([a, b]);

    await changeAndWait(world.ref, () => h.prisma.webhookEndpoint.update({ where: { id: a }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } }));
    expect(await calledEndpoints(world.ref)).toEqual([b]);

    await changeAndWait(world.ref, () => h.prisma.webhookEndpoint.update({ where: { id: b }, data: { url: `${first.url}moved` } }));
    const before = first.received.length;
    expect(await calledEndpoints(world.ref)).toEqual([b]);
    expect(first.received.length).toBe(before + 1);

    await changeAndWait(world.ref, () => h.prisma.webhookEndpoint.update({ where: { id: b }, data: { subscriptions: ["visitor"] } }));
    expect(await calledEndpoints(world.ref)).toEqual([]);
    await changeAndWait(world.ref, () => h.prisma.webhookEndpoint.delete({ where: { id: a } }));
    expect(await calledEndpoints(world.ref)).toEqual([]);
  });

  it("sees identity-provider changes and organization renames, and does not cache unknown worlds", async () => {
    const r = await receiver();
    const world = await h.createWorld([{ id: "acme-okta", kind: "openid-connect", exposeAccessToken: false }]);
    await h.createEndpoint(world, { url: r.url, secret: generateSecret() });
    await calledEndpoints(world.ref);
    expect(sentTokens(r, 0)).toEqual([]);

    await changeAndWait(world.ref, () =>
      h.prisma.world.update({ where: { id: world.id }, data: { identityProviders: [{ id: "acme-okta", kind: "openid-connect", exposeAccessToken: true }] } }),
    );
    await calledEndpoints(world.ref);
    expect(sentTokens(r, 1)).toEqual([{ provider: "acme-okta", token: "tok" }]);

    const renamed = `${world.organizationSlug}-renamed`;
    await changeAndWait(world.ref, () => h.prisma.organization.update({ where: { slug: world.organizationSlug }, data: { slug: renamed } }));
    expect((await h.post(hookBody(world.ref))).status).toBe(404);
    expect((await h.post(hookBody(`${renamed}/${world.slug}`))).status).toBe(200);
    // The harness removes organizations by slug prefix; the renamed one still starts with it.
    expect(renamed.startsWith(world.organizationSlug)).toBe(true);
    expect((await h.post(hookBody(world.ref))).status).toBe(404);
  });

  it("steps aside while its LISTEN connection is down, and caches again once it is back", async () => {
    const r = await receiver();
    const world = await h.createWorld();
    const id = await h.createEndpoint(world, { url: r.url, secret: generateSecret() });
    expect(await calledEndpoints(world.ref)).toEqual([id]);
    const pid = h.listener!.backendPid;
    expect(pid).not.toBeNull();
    await h.prisma.$queryRaw`SELECT pg_terminate_backend(${pid}::int)`;
    await eventually("the listener noticed its connection was lost", () => !h.cache!.isActive, { timeoutMs: 10_000 });

    // Down: every call reads the database, so a change is seen at once, with nothing to wait for.
    const hits = h.cache!.hits;
    await h.prisma.webhookEndpoint.update({ where: { id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
    expect(await calledEndpoints(world.ref)).toEqual([]);
    await h.prisma.webhookEndpoint.update({ where: { id }, data: { enabled: true, disabledReason: null, disabledAt: null } });
    expect(await calledEndpoints(world.ref)).toEqual([id]);
    expect(h.cache!.hits).toBe(hits);
    // Still down (the harness's listener waits 3 s before reconnecting), so the above ran uncached.
    expect(h.cache!.isActive).toBe(false);

    await eventually("the listener reconnected", () => h.cache!.isActive && h.listener!.backendPid !== pid, { timeoutMs: 10_000 });
    expect(await callsUntilHit(world.ref, [id])).toBeLessThan(MAX_CALLS);
    // One line when it went, one when it came back (not one per retry), both structured.
    const outage = h.logs.filter((l) => /^postgresql (unreachable|reachable again)$/.test(String(l.msg)));
    expect(outage.map((l) => [l.level, l.msg, (l.fields as { client?: string }).client])).toEqual([
      ["error", "postgresql unreachable", "world settings listener"],
      ["info", "postgresql reachable again", "world settings listener"],
    ]);
  });
});
