/**
 * The 24 h figures through the API: an endpoint's (`GET .../endpoints/{id}/stats`) and its world's
 * (`GET /worlds/{org}/{world}/stats`, every endpoint together), with the attempts per clock hour
 * the dashboard's charts draw. Attempts come from real Test actions against loopback receivers.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { DrainSignals } from "@vw/queues";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { createCurrentEndpoint, createWorld, type TestWorld } from "../test/delivery-fixtures.js";

let api: AdminApiHarness;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "any" });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await api.close();
});

/** An endpoint of `w` on a receiver answering `answer`, and one Test attempt made to it. */
async function endpointWithOneTest(w: TestWorld, answer: number): Promise<string> {
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  const endpoint = await createCurrentEndpoint(api, w, r.url, ["recording"]);
  r.setSecret(endpoint.secret);
  const test = await api.request("POST", `${w.endpoints}/${endpoint.id}/test`);
  expect([test.status, test.body.status]).toEqual([200, answer]);
  return endpoint.id;
}

const HOUR = 3600_000;
const hourOf = (iso: string) => Math.floor(Date.parse(iso) / HOUR) * HOUR;

/**
 * The 25 consecutive clock hours from the window's start to now, holding `recent` in the last two
 * (the attempts were made just now, which may have been the end of the previous hour).
 */
function expectHours(body: { since: string; until: string; attemptsByHour: { hour: string; succeeded: number; failed: number }[] }, recent: { succeeded: number; failed: number }) {
  const hours = body.attemptsByHour;
  expect(hours).toHaveLength(25);
  expect(hours.map((h) => Date.parse(h.hour))).toEqual(hours.map((_, i) => hourOf(body.since) + i * HOUR));
  expect(Date.parse(hours.at(-1)!.hour)).toBe(hourOf(body.until));
  expect(hours.slice(0, -2).every((h) => h.succeeded === 0 && h.failed === 0)).toBe(true);
  const lastTwo = hours.slice(-2);
  expect({ succeeded: lastTwo.reduce((n, h) => n + h.succeeded, 0), failed: lastTwo.reduce((n, h) => n + h.failed, 0) }).toEqual(recent);
}

describe("24 h figures", () => {
  it("of an endpoint: attempts in total and per hour, deliveries by status", async () => {
    const w = await createWorld(api);
    const id = await endpointWithOneTest(w, 200);
    const res = await api.request("GET", `${w.endpoints}/${id}/stats`);
    expect(res.status).toBe(200);
    expect(res.body.attempts).toEqual({ total: 1, succeeded: 1, failed: 0 });
    expect(res.body.deliveries).toMatchObject({ total: 1, delivered: 1 });
    expectHours(res.body, { succeeded: 1, failed: 0 });
  });

  it("of a world: every endpoint's together, and nothing of another world's", async () => {
    const w = await createWorld(api);
    await endpointWithOneTest(w, 200);
    await endpointWithOneTest(w, 500);
    await endpointWithOneTest(w, 503);
    const other = await createWorld(api);
    await endpointWithOneTest(other, 200);

    const res = await api.request("GET", `/admin/v1/worlds/${w.org}/${w.world}/stats`);
    expect(res.status).toBe(200);
    expect(res.body.attempts).toEqual({ total: 3, succeeded: 1, failed: 2 });
    expect(res.body.successRate).toBeCloseTo(1 / 3);
    expect(res.body.deliveries.total).toBe(3);
    expectHours(res.body, { succeeded: 1, failed: 2 });
  });

  it("of a world without endpoints: zeros, every hour present", async () => {
    const w = await createWorld(api);
    const res = await api.request("GET", `/admin/v1/worlds/${w.org}/${w.world}/stats`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ attempts: { total: 0, succeeded: 0, failed: 0 }, successRate: null, latencyMs: null, lastAttempt: null });
    expectHours(res.body, { succeeded: 0, failed: 0 });
  });

  it("of an unknown world is a 404, and the route only reads", async () => {
    const w = await createWorld(api);
    expectProblem(await api.request("GET", `/admin/v1/worlds/${w.org}/nope/stats`), 404, "not-found");
    expectProblem(await api.request("POST", `/admin/v1/worlds/${w.org}/${w.world}/stats`), 405);
  });
});

describe("the sending window in an endpoint's figures", () => {
  it("is what the endpoint's last drain left: absent before any, slowed down with why and since when, not once it is back at its largest", async () => {
    const w = await createWorld(api);
    const id = await endpointWithOneTest(w, 200);
    const stats = async () => (await api.request("GET", `${w.endpoints}/${id}/stats`)).body;
    // No drain ran for it yet: nothing to say.
    expect((await stats()).sendingWindow).toBeUndefined();

    // The worker's drain hands its window on through Redis (as its windows.ts does).
    const signals = new DrainSignals(api.deliveryQueue);
    const since = Date.now() - 30_000;
    await signals.saveWindow(id, { size: 5, max: 10, reason: "throttled", since, ceiling: 10 });
    expect((await stats()).sendingWindow).toEqual({ size: 5, max: 10, slowedDown: true, reason: "throttled", since: new Date(since).toISOString() });
    // The world's figures have no window of their own.
    expect((await api.request("GET", `/admin/v1/worlds/${w.org}/${w.world}/stats`)).body.sendingWindow).toBeUndefined();

    await signals.saveWindow(id, { size: 10, max: 10, reason: null, since: null, ceiling: null });
    expect((await stats()).sendingWindow).toEqual({ size: 10, max: 10, slowedDown: false, reason: null, since: null });
  });
});
