/**
 * Analytics as deployed: event-ingest and delivery-worker as separate processes, inner events
 * POSTed to `/v1/analytics`, the worker's scheduled flush (a short ANALYTICS_FLUSH_INTERVAL_MS)
 * turning them into one `analytics.batch` per endpoint, verified by customer-like receivers with
 * the `standardwebhooks` library and validated against the published schema. The privacy rules
 * (spec: analytics.batch) are checked on what the receiver gets: a world that opted out of
 * user-level activity sees pseudonyms and no `fileName`; a category switched off sends nothing of
 * its families; a world with the defaults gets its events unchanged.
 */
import { createHmac, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { DEFAULT_WORLD_ANALYTICS, validateDelivered, type WorldAnalytics } from "@vw/contracts";
import { spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const INGEST_TOKEN = "e2e-analytics-token-4f9a2c7e1b8d6035";
const PSEUDONYM_KEY = "e2e-analytics-pseudonym-key-0123456789abcdef";
const PLAY_URL = "https://play.example.test";
let h: Harness;
let ingest: ServiceProcess;
let worker: ServiceProcess;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  [ingest, worker] = await Promise.all([
    spawnService(join(servicesDir, "event-ingest"), h.processEnv({ INGEST_TOKEN, PLAY_URL, ANALYTICS_PSEUDONYM_KEY: PSEUDONYM_KEY })),
    // The shortest accepted flush interval: a flush every second.
    spawnService(join(servicesDir, "delivery-worker"), h.processEnv({ PLAY_URL, ANALYTICS_FLUSH_INTERVAL_MS: "1000" })),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([ingest?.stop(), worker?.stop()]);
  const keys = await h.redis.keys(`${h.keyPrefix}:analytics:*`);
  if (keys.length > 0) await h.redis.del(...keys);
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

/** A world with these analytics settings and one `analytics` endpoint at a verifying receiver. */
async function analyticsWorld(settings: WorldAnalytics) {
  const receiver = await startWebhookReceiver({ answer: 204 });
  receivers.push(receiver);
  const world = await h.createWorld();
  await h.prisma.world.update({ where: { id: world.id }, data: { analytics: { ...settings, categories: { ...settings.categories } } } });
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url, subscriptions: ["analytics"] });
  receiver.setSecret(endpoint.secret);
  return { world, receiver };
}

function inner(eventName: string, uuid: string, source: "front" | "pusher", properties: Record<string, unknown>) {
  const at = new Date().toISOString();
  return {
    id: randomUUID(),
    type: eventName,
    timestamp: at,
    data: { eventName, source, eventTime: at, user: { uuid }, room: { url: `${PLAY_URL}/@/acme/lobby/office.wam` }, properties },
  };
}

/** The events of one world's session: two members, a document opened, a camera toggle. */
function session() {
  const ada = randomUUID();
  const grace = randomUUID();
  const closed = inner("cowebsite.closed", ada, "front", {
    url: "https://docs.example.com",
    targetUrl: "https://docs.example.com",
    mediaKind: "pdf",
    fileName: "salaries-2026.pdf",
    fileExtension: "pdf",
    durationSeconds: 42,
    endReason: "closed_by_client",
  });
  const dwell = inner("area.dwell", ada, "pusher", { areaId: "a1", areaName: "Kitchen", durationSeconds: 300 });
  const left = inner("user.disconnected", grace, "pusher", { durationSeconds: 3600, disconnectReason: "socket_closed" });
  const camera = inner("media.camera.toggled", grace, "front", {});
  return { ada, grace, events: [closed, dwell, left, camera] };
}

async function postAnalytics(world: { slug: string; organizationSlug: string }, events: unknown[]) {
  const res = await fetch(`${ingest.url}/v1/analytics`, {
    method: "POST",
    headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ world: `${world.organizationSlug}/${world.slug}`, events }),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

/** The expected pseudonym, computed as event-ingest's README documents it. */
function pseudonym(worldId: string, uuid: string): string {
  return createHmac("sha256", PSEUDONYM_KEY).update(`${worldId}:${uuid}`).digest("base64url").slice(0, 22);
}

it("delivers one signed, valid analytics.batch per endpoint, with the world's privacy settings applied", async () => {
  const optedOut = await analyticsWorld({
    ...DEFAULT_WORLD_ANALYTICS,
    userLevelActivity: false,
    categories: { ...DEFAULT_WORLD_ANALYTICS.categories, qualityDiagnostics: false },
  });
  const open = await analyticsWorld(DEFAULT_WORLD_ANALYTICS);
  const privateSession = session();
  const openSession = session();

  expect(await postAnalytics(optedOut.world, privateSession.events)).toEqual({ status: 202, body: { accepted: 3, dropped: 1, endpoints: 1 } });
  expect(await postAnalytics(open.world, openSession.events)).toEqual({ status: 202, body: { accepted: 4, dropped: 0, endpoints: 1 } });
  const [[privateRequest], [openRequest]] = await Promise.all([optedOut.receiver.waitFor(1), open.receiver.waitFor(1)]);

  for (const [request, world] of [
    [privateRequest!, optedOut.world],
    [openRequest!, open.world],
  ] as const) {
    expect(request.verifyError).toBeNull();
    const body = JSON.parse(request.body.toString("utf8"));
    expect(validateDelivered("analytics.batch", body)).toEqual({ ok: true, value: body });
    expect(request.headers["webhook-id"]).toBe(body.deliveryId);
    expect(body).toMatchObject({ type: "analytics.batch", apiVersion: "2026-11-01", world: { slug: world.slug, url: `${PLAY_URL}/@/${world.organizationSlug}/${world.slug}` } });
    const row = await h.prisma.webhookDelivery.findFirstOrThrow({ where: { id: body.deliveryId } });
    expect(row.type).toBe("analytics.batch");
    expect(Buffer.from(row.body).equals(request.body)).toBe(true);
  }

  // Opted out of user-level activity, quality diagnostics off: the camera toggle never left, each
  // member is a stable pseudonym, and the document name was stripped; nothing else changed.
  const privateEvents = JSON.parse(privateRequest!.body.toString("utf8")).data.events;
  const [closed, dwell, left] = privateSession.events;
  expect(privateEvents.map((e: { id: string }) => e.id)).toEqual([closed!.id, dwell!.id, left!.id]);
  const adaAlias = pseudonym(optedOut.world.id, privateSession.ada);
  expect(privateEvents.map((e: { data: { user: { uuid: string } } }) => e.data.user.uuid)).toEqual([adaAlias, adaAlias, pseudonym(optedOut.world.id, privateSession.grace)]);
  const { fileName: _stripped, ...closedKept } = closed!.data.properties;
  expect(privateEvents[0].data.properties).toEqual(closedKept);
  expect(privateEvents[1].data).toEqual({ ...dwell!.data, user: { uuid: adaAlias } });
  const privateText = privateRequest!.body.toString("utf8");
  for (const secret of [privateSession.ada, privateSession.grace, "salaries-2026.pdf"]) expect(privateText).not.toContain(secret);

  // The defaults: every event, exactly as posted.
  expect(JSON.parse(openRequest!.body.toString("utf8")).data.events).toEqual(openSession.events);

  const metrics = await (await fetch(`${worker.url}/metrics`)).text();
  expect(metrics).toMatch(/^vw_analytics_batches_total 2$/m);
}, 60_000);
