/**
 * DELIVERY_PROXY_URL as deployed: delivery-worker and event-ingest as their own processes, given
 * the variable (with credentials) and nothing else, send through a real tinyproxy. Deliveries
 * carry the endpoint's custom headers and verify with `standardwebhooks`; the history shows the
 * headers' names only and never the proxy's credentials; a proxy that goes away costs retries,
 * not deliveries, and no step towards disabling the endpoint; the auth hook goes through the same
 * proxy.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, spawnService, startForwardProxy, startWebhookReceiver, type ForwardProxy, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const INGEST_TOKEN = "egress-ingest-token-5d8e1c7a2b9f4036";
const CREDENTIALS = { user: "deliveries", password: "egress-pr0xy-pw" };
const GATEWAY_TOKEN = "Bearer gateway-only-value-7f3a";
/** Retries come quickly, and for long enough (about 30 s) to outlast a proxy restart on a busy machine. */
const RETRY_DELAYS = "300ms,1s,2s,3s,5s,5s,5s,5s,5s";

let h: Harness;
let proxy: ForwardProxy;
let worker: ServiceProcess;
let ingest: ServiceProcess;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  [h, proxy] = await Promise.all([startHarness({ inProcessWorker: false }), startForwardProxy({ basicAuth: CREDENTIALS })]);
  const env = h.processEnv({ DELIVERY_PROXY_URL: proxy.url, RETRY_DELAYS, LOG_LEVEL: "info" });
  [worker, ingest] = await Promise.all([
    spawnService(join(servicesDir, "delivery-worker"), env),
    spawnService(join(servicesDir, "event-ingest"), { ...env, INGEST_TOKEN, PLAY_URL: "https://play.example.test" }),
  ]);
}, 90_000);
afterAll(async () => {
  await Promise.all([worker?.stop(), ingest?.stop()]);
  await Promise.all([h?.close(), proxy?.stop(), ...receivers.map((r) => r.close())]);
});

async function endpointOnReceiver(subscriptions: string[]) {
  const receiver = await startWebhookReceiver({ answer: 200 });
  receivers.push(receiver);
  const world = await h.createWorld();
  const endpoint = await h.createEndpoint(world.id, { url: receiver.url, subscriptions, headers: { Authorization: GATEWAY_TOKEN, "X-Tenant": "acme" } });
  receiver.setSecret(endpoint.secret);
  return { receiver, world, endpoint };
}

/** What nobody but the proxy and the receiver may ever see. */
function expectNoSecrets(text: string): void {
  expect(text).not.toContain(CREDENTIALS.password);
  expect(text).not.toContain(Buffer.from(`${CREDENTIALS.user}:${CREDENTIALS.password}`).toString("base64"));
  expect(text).not.toContain(GATEWAY_TOKEN);
}

describe("delivery-worker with DELIVERY_PROXY_URL", () => {
  it("delivers through the proxy with the endpoint's custom headers; the history shows their names, never a value or the proxy's credentials", async () => {
    const { receiver, endpoint } = await endpointOnReceiver(["visitor"]);
    const deliveryId = await h.seedDelivery(endpoint);
    const [got] = await receiver.waitFor(1);
    expect(got?.verifyError).toBeNull();
    expect(got?.headers).toMatchObject({ authorization: GATEWAY_TOKEN, "x-tenant": "acme", "webhook-id": deliveryId, via: expect.stringMatching(/tinyproxy/) });
    expect(proxy.requests()).toContain(`POST http://127.0.0.1:${receiver.port}/hook HTTP/1.1`);

    await eventually("the attempt is logged", async () => (await h.prisma.deliveryAttempt.count({ where: { deliveryId } })) === 1);
    const attempt = await h.prisma.deliveryAttempt.findFirstOrThrow({ where: { deliveryId } });
    expect(attempt.requestHeaders).toMatchObject({ Authorization: "[redacted]", "X-Tenant": "[redacted]", "webhook-id": deliveryId });
    expectNoSecrets(JSON.stringify(attempt));
    expectNoSecrets(worker.stdout() + worker.stderr());
  }, 60_000);

  it("a proxy that is down fails attempts as connection errors, retried on the schedule; the delivery arrives once it is back", async () => {
    const { receiver, endpoint } = await endpointOnReceiver(["visitor"]);
    await proxy.kill();
    let deliveryId = "";
    try {
      deliveryId = await h.seedDelivery(endpoint);
      await eventually("an attempt failed on the missing proxy", async () => (await h.prisma.deliveryAttempt.count({ where: { deliveryId, errorKind: "connection" } })) > 0);
      // The platform's egress failed, not the receiver: no step towards disabling the endpoint
      // (the counter is written in the statement that logged the attempt).
      expect((await h.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: endpoint.id } })).consecutiveFailures).toBe(0);
    } finally {
      await proxy.restart();
    }
    const [got] = await receiver.waitFor(1, 45_000);
    expect(got?.headers["webhook-id"]).toBe(deliveryId);
    expect(got?.verifyError).toBeNull();
    expect((await h.settled(endpoint.id, deliveryId, ["delivered"], 45_000)).status).toBe("delivered");
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
    expect(attempts[0]).toMatchObject({ errorKind: "connection", error: "could not connect to 127.0.0.1: the delivery proxy could not be reached", verdict: "retry", responseStatus: null });
    expect(attempts.at(-1)).toMatchObject({ verdict: "delivered", responseStatus: 200 });
    expectNoSecrets(JSON.stringify(attempts));
    expectNoSecrets(worker.stdout() + worker.stderr());
    // The operator is told where the proxy was, in the log (never the customer's history).
    expect(worker.stdout()).toContain(`delivery proxy 127.0.0.1:${proxy.port}`);
  }, 90_000);
});

describe("event-ingest's auth hook with DELIVERY_PROXY_URL", () => {
  it("calls member.connecting through the proxy, with the endpoint's custom headers", async () => {
    const { receiver, world } = await endpointOnReceiver(["auth"]);
    const res = await fetch(`${ingest.url}/v1/auth-hook`, {
      method: "POST",
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ world: `${world.organizationSlug}/${world.slug}`, roomUrl: "https://play.example.test/@/acme/hq/lobby.wam", uuid: "2f0a3c3e-8f5e-4b7e-9f55-5b1f1f0d3a11", accessTokens: [] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { results: { status: number | null }[] }).results).toEqual([expect.objectContaining({ status: 200 })]);
    const [got] = await receiver.waitFor(1);
    expect(got?.verifyError).toBeNull();
    expect(got?.headers).toMatchObject({ authorization: GATEWAY_TOKEN, via: expect.stringMatching(/tinyproxy/) });
    expect(proxy.requests()).toContain(`POST http://127.0.0.1:${receiver.port}/hook HTTP/1.1`);
    expectNoSecrets(ingest.stdout() + ingest.stderr());
  }, 60_000);
});
