/**
 * The pipeline as deployed: event-ingest and delivery-worker as separate processes, events POSTed
 * to ingest, deliveries verified by customer-like receivers with the `standardwebhooks` library
 * and validated against the published delivery schemas.
 */
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { EVENT_SAMPLES, validateDelivered } from "@vw/contracts";
import { spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const INGEST_TOKEN = "e2e-ingest-token-8c3f1a9e6b2d7054";
let h: Harness;
let ingest: ServiceProcess;
let worker: ServiceProcess;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  [ingest, worker] = await Promise.all([
    spawnService(join(servicesDir, "event-ingest"), h.processEnv({ INGEST_TOKEN, PLAY_URL: "https://play.example.test" })),
    spawnService(join(servicesDir, "delivery-worker"), h.processEnv()),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([ingest?.stop(), worker?.stop()]);
  await h.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver() {
  const r = await startWebhookReceiver({ answer: 200 });
  receivers.push(r);
  return r;
}

async function postEvents(events: unknown[]) {
  const res = await fetch(`${ingest.url}/v1/events`, {
    method: "POST",
    headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ events }),
  });
  return { status: res.status, body: (await res.json()) as { accepted: number; duplicates: number; deliveries: number } };
}

it("delivers each event once per subscribed, enabled endpoint, signed, as a valid envelope", async () => {
  const world = await h.createWorld();
  const [visitorHook, allHook, legacyHook, disabledHook, consentOnly] = await Promise.all([receiver(), receiver(), receiver(), receiver(), receiver()]);
  const visitor = await h.createEndpoint(world.id, { url: visitorHook.url, subscriptions: ["visitor"] });
  const all = await h.createEndpoint(world.id, { url: allHook.url, subscriptions: ["recording", "visitor", "consent"] });
  await h.createEndpoint(world.id, { url: legacyHook.url, format: "legacy", withSecret: false, subscriptions: ["visitor"] });
  const disabled = await h.createEndpoint(world.id, { url: disabledHook.url, subscriptions: ["visitor"] });
  await h.prisma.webhookEndpoint.update({ where: { id: disabled.id }, data: { enabled: false, disabledReason: "manual", disabledAt: new Date() } });
  await h.createEndpoint(world.id, { url: consentOnly.url, subscriptions: ["consent"] });
  visitorHook.setSecret(visitor.secret);
  allHook.setSecret(all.secret);

  const timestamp = "2026-11-22T10:00:00.000Z";
  const visitorEvent = { id: randomUUID(), world: `${world.organizationSlug}/${world.slug}`, type: "visitor.registered", timestamp, data: EVENT_SAMPLES["visitor.registered"] };
  const recordingEvent = { ...visitorEvent, id: randomUUID(), type: "recording.completed", data: EVENT_SAMPLES["recording.completed"] };
  const answer = await postEvents([visitorEvent, recordingEvent]);
  expect(answer).toEqual({ status: 202, body: expect.objectContaining({ accepted: 2, duplicates: 0, deliveries: 4 }) });

  await Promise.all([visitorHook.waitFor(1), allHook.waitFor(2), legacyHook.waitFor(1)]);
  for (const request of [...visitorHook.received, ...allHook.received]) {
    expect(request.verifyError).toBeNull();
    const envelope = JSON.parse(request.body.toString("utf8"));
    expect(validateDelivered(envelope.type, envelope)).toEqual({ ok: true, value: envelope });
    expect(request.headers["webhook-id"]).toBe(envelope.deliveryId);
    expect(envelope).toMatchObject({ apiVersion: "2026-11-01", timestamp, world: { slug: world.slug, url: `https://play.example.test/@/${world.organizationSlug}/${world.slug}` } });
    expect(envelope.test).toBeUndefined();
  }
  expect(allHook.received.map((r) => JSON.parse(r.body.toString()).type).sort()).toEqual(["recording.completed", "visitor.registered"]);
  expect(legacyHook.received[0]!.headers["webhook-signature"]).toBeUndefined();

  // A producer retry of the same events creates nothing new.
  expect((await postEvents([visitorEvent])).body).toMatchObject({ accepted: 0, duplicates: 1, deliveries: 0 });
  const rows = await h.prisma.webhookDelivery.findMany({ where: { worldId: world.id } });
  expect(rows).toHaveLength(4);
  // Everything sent ends delivered; nothing ever reached the disabled or unsubscribed endpoints.
  for (const row of rows) expect((await h.settled(row.endpointId, row.id)).status).toBe("delivered");
  // Delivered: no state row is left for any of them.
  expect(await h.prisma.deliveryState.count({ where: { deliveryId: { in: rows.map((r) => r.id) } } })).toBe(0);
  expect(disabledHook.received).toHaveLength(0);
  expect(consentOnly.received).toHaveLength(0);
  expect(visitorHook.received).toHaveLength(1);
}, 60_000);
