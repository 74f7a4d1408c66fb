/**
 * The whole platform behind a transaction-pooling PgBouncer (DATABASE_URL `?pgbouncer=true`,
 * DIRECT_URL to PostgreSQL): admin-api's endpoints, a burst of events through event-ingest
 * delivered and signed by delivery-worker (verified with `standardwebhooks`), Replay and the
 * history, map storage with an API key, member intake and the Inbound API lookup, a dashboard
 * session. Debian's PgBouncer 1.18 keeps no prepared statement across transactions: a service
 * sending one by name would fail its requests here.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { SERVICE_NAMES, startPgBouncerStack, type PgBouncerStack } from "./pgbouncer-stack.js";

let s: PgBouncerStack;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  s = await startPgBouncerStack();
}, 240_000);
afterAll(async () => {
  await s?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

const adminUrl = () => s.services["admin-api"].url;

async function worldWithEndpoint() {
  const receiver = await startWebhookReceiver({ answer: 200 });
  receivers.push(receiver);
  const { org, world } = await s.createWorld();
  const endpoints = `/admin/v1/worlds/${org}/${world}/endpoints`;
  const created = await s.call(adminUrl(), "POST", endpoints, { body: { url: receiver.url, subscriptions: ["visitor"] } });
  expect(created.status).toBe(201);
  receiver.setSecret(created.body.secret);
  return { org, world, receiver, endpoint: `${endpoints}/${created.body.id as string}`, endpoints, endpointId: created.body.id as string };
}

/** Every delivery of the endpoint in the history, following its cursor. */
async function history(endpoint: string): Promise<{ id: string; status: string }[]> {
  const all: { id: string; status: string }[] = [];
  let cursor: string | null = null;
  do {
    const page = await s.call(adminUrl(), "GET", `${endpoint}/deliveries?limit=100${cursor ? `&cursor=${cursor}` : ""}`);
    expect(page.status).toBe(200);
    all.push(...(page.body.items as { id: string; status: string }[]));
    cursor = page.body.nextCursor as string | null;
  } while (cursor);
  return all;
}

describe("behind PgBouncer in transaction mode", () => {
  it("serves admin-api's endpoint CRUD", async () => {
    const { endpoint, endpoints } = await worldWithEndpoint();
    const patched = await s.call(adminUrl(), "PATCH", endpoint, { body: { subscriptions: ["visitor", "consent"] } });
    expect({ status: patched.status, body: patched.body }).toMatchObject({ status: 200 });
    expect((await s.call(adminUrl(), "GET", endpoint)).body).toMatchObject({ subscriptions: ["visitor", "consent"], enabled: true });
    const list = await s.call(adminUrl(), "GET", endpoints);
    expect(list.status).toBe(200);
    expect(list.body.items).toHaveLength(1);
  }, 60_000);

  it("delivers a burst of events once each, signed; Replay sends one again; the history shows both", async () => {
    const { org, world, receiver, endpoint } = await worldWithEndpoint();
    const uuids: string[] = [];
    // 8 concurrent requests of 25 events: the intake's transactions interleave on PgBouncer's server connections.
    const batches = Array.from({ length: 8 }, () => Array.from({ length: 25 }, () => s.visitorEvent(org, world)));
    for (const batch of batches) uuids.push(...batch.map((e) => e.data.uuid as string));
    const answers = await Promise.all(batches.map((batch) => s.postEvents(batch)));
    for (const answer of answers) expect(answer).toMatchObject({ status: 202, body: expect.objectContaining({ accepted: 25, deliveries: 25 }) });

    const got = await receiver.waitFor(uuids.length, 120_000);
    for (const request of got) expect(request.verifyError).toBeNull();
    const deliveredUuids = got.map((r) => (JSON.parse(r.body.toString("utf8")) as { data: { uuid: string } }).data.uuid);
    expect([...deliveredUuids].sort()).toEqual([...uuids].sort());
    const deliveryIds = got.map((r) => r.headers["webhook-id"] as string);
    expect(new Set(deliveryIds).size).toBe(uuids.length);

    await eventually("the history shows every delivery delivered", async () => {
      const rows = await history(endpoint);
      return rows.length === uuids.length && rows.every((row) => row.status === "delivered");
    }, { timeoutMs: 60_000 });

    const replayed = deliveryIds[0]!;
    const replay = await s.call(adminUrl(), "POST", `${endpoint}/deliveries/${replayed}/replay`);
    expect(replay.status).toBeLessThan(300);
    const again = await receiver.waitFor(uuids.length + 1, 60_000);
    expect(again[uuids.length]!.headers["webhook-id"]).toBe(replayed);
    expect(again[uuids.length]!.verifyError).toBeNull();
    await eventually("the replayed delivery shows its two attempts, delivered", async () => {
      const detail = await s.call(adminUrl(), "GET", `${endpoint}/deliveries/${replayed}`);
      return detail.status === 200 && detail.body.status === "delivered" && (detail.body.attempts as unknown[]).length === 2;
    }, { timeoutMs: 60_000 });
  }, 300_000);

  it("stores a map file with the world's API key through map-storage, and reads it back", async () => {
    const { org, world } = await s.createWorld();
    const key = await s.call(adminUrl(), "POST", `/admin/v1/worlds/${org}/${world}/api-keys`, { body: {} });
    expect(key.status).toBe(201);
    const path = `rooms/${randomUUID()}.wam`;
    const wam = {
      version: "2.1.0",
      mapUrl: "https://maps.example.com/office.tmj",
      entities: {},
      areas: [],
      entityCollections: [],
      metadata: { name: "Office behind PgBouncer" },
    };
    const base = s.services["map-storage"].url;
    const put = await s.call(base, "PUT", `/${org}/${world}/${path}`, { token: key.body.token as string, body: wam });
    expect(put.status).toBe(201);
    const got = await s.call(base, "GET", `/${org}/${world}/${path}`, { token: null });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ metadata: { name: "Office behind PgBouncer" } });
    const refused = await s.call(base, "PUT", `/${org}/${world}/${path}`, { token: "vw_not-a-key", body: wam });
    expect(refused.status).toBe(401);
  }, 60_000);

  it("takes a member intake on event-ingest and answers the Inbound API lookup on admin-api", async () => {
    const { org, world } = await s.createWorld();
    const key = await s.call(adminUrl(), "POST", `/admin/v1/worlds/${org}/${world}/api-keys`, { body: {} });
    expect(key.status).toBe(201);
    const uuid = randomUUID();
    const intake = await s.call(s.services["event-ingest"].url, "PUT", `/v1/worlds/${org}/${world}/members/${uuid}`, {
      token: s.ingestToken,
      body: { name: "Ada Bouncer", email: "ada@example.test", type: "member" },
    });
    expect(intake.status).toBeLessThan(300);
    const lookup = await s.call(adminUrl(), "GET", `/api/v1/worlds/${world}/members/${uuid}`, { token: key.body.token as string });
    expect(lookup).toMatchObject({ status: 200, body: { uuid, name: "Ada Bouncer", email: "ada@example.test", type: "member" } });
  }, 60_000);

  it("opens a dashboard session from a minted link and serves the world's endpoints with its cookie", async () => {
    const { org, world, endpointId } = await worldWithEndpoint();
    const minted = await s.call(adminUrl(), "POST", `/admin/v1/worlds/${org}/${world}/dashboard-sessions`, { body: {} });
    expect(minted.status).toBe(201);
    const code = new URLSearchParams(new URL(minted.body.url as string).hash.slice(1)).get("code");
    const opened = await s.call(adminUrl(), "POST", "/dashboard/api/session", { token: null, body: { code }, headers: { origin: adminUrl() } });
    expect(opened.status).toBe(200);
    const cookie = (opened.headers.get("set-cookie") ?? "").split(";")[0]!;
    const session = await s.call(adminUrl(), "GET", "/dashboard/api/session", { token: null, headers: { cookie } });
    expect(session).toMatchObject({ status: 200, body: { organization: org, world } });
    const endpoints = await s.call(adminUrl(), "GET", `/admin/v1/worlds/${org}/${world}/endpoints`, { token: null, headers: { cookie, origin: adminUrl() } });
    expect(endpoints.status).toBe(200);
    expect(endpoints.body.items.map((e: { id: string }) => e.id)).toEqual([endpointId]);
  }, 60_000);

  it("calls the world's auth hook from event-ingest, its targets read through PgBouncer", async () => {
    const receiver = await startWebhookReceiver({ answer: 200 });
    receivers.push(receiver);
    const { org, world } = await s.createWorld();
    const created = await s.call(adminUrl(), "POST", `/admin/v1/worlds/${org}/${world}/endpoints`, { body: { url: receiver.url, subscriptions: ["auth"] } });
    expect(created.status).toBe(201);
    receiver.setSecret(created.body.secret as string);
    for (let call = 1; call <= 3; call += 1) {
      const res = await s.call(s.services["event-ingest"].url, "POST", "/v1/auth-hook", {
        token: s.ingestToken,
        body: { world: `${org}/${world}`, roomUrl: `https://play.example.test/@/${org}/${world}/lobby.wam`, uuid: randomUUID(), accessTokens: [] },
      });
      expect({ status: res.status, results: res.body.results }).toEqual({ status: 200, results: [expect.objectContaining({ status: 200 })] });
      const got = await receiver.waitFor(call);
      expect(got[call - 1]!.verifyError).toBeNull();
    }
  }, 60_000);

  it("every service reached PostgreSQL through PgBouncer, under its own application_name", async () => {
    const clients = await s.bouncer.clients();
    const names = new Set(clients.filter((c) => c.database === s.database.name).map((c) => c.applicationName));
    for (const name of SERVICE_NAMES) expect(names).toContain(name);
    for (const service of Object.values(s.services)) expect(service.child.exitCode).toBeNull();
  });
});
