/**
 * Custom headers of an endpoint through the admin API: set on create, replaced by PATCH, cleared
 * with `{}`; each rule refused with a 400 pointing at the header; values sealed at rest and never
 * read back (answers, history, logs); carried by the Test action, whose signature still verifies
 * with `standardwebhooks` at a real receiver, directly and through a real tinyproxy.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { MAX_ENDPOINT_HEADERS, RESERVED_HEADER_NAMES } from "@vw/contracts";
import { startForwardProxy, startWebhookReceiver, type ForwardProxy, type WebhookReceiver } from "@vw/testing";
import { openEndpointHeaders, parseDeliveryProxyUrl } from "@vw/webhook-core";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectEndpointShape, expectProblem, rawRow } from "../test/endpoint-fixtures.js";
import { createWorld, endpointRow, type TestWorld } from "../test/delivery-fixtures.js";

const TOKEN = "Bearer gw-token-never-shown-91c2";
let api: AdminApiHarness;
let proxied: AdminApiHarness;
let proxy: ForwardProxy;
let receiver: WebhookReceiver;
let w: TestWorld;

beforeAll(async () => {
  [api, proxy, receiver] = await Promise.all([startAdminApi({ endpointUrlPolicy: "any" }), startForwardProxy(), startWebhookReceiver({ answer: 200 })]);
  proxied = await startAdminApi({ endpointUrlPolicy: "any", deliveryProxy: parseDeliveryProxyUrl(proxy.url) });
  w = await createWorld(api);
});
afterAll(async () => {
  await Promise.all([api.close(), proxied.close(), proxy.stop(), receiver.close()]);
});

async function create(headers: unknown, harness = api, world = w) {
  return harness.request("POST", world.endpoints, { body: { url: receiver.url, subscriptions: ["recording"], headers } });
}

/** Every text the API answered or logged, and the endpoint's stored row: none may hold a value. */
async function expectNowhere(value: string, id: string, answers: unknown[]): Promise<void> {
  expect(JSON.stringify(answers)).not.toContain(value);
  expect(JSON.stringify(api.logs)).not.toContain(value);
  expect(await rawRow(api, id)).not.toContain(value);
}

describe("headers on create and PATCH", () => {
  it("stores them sealed and shows only their names, sorted case-insensitively, in every read", async () => {
    const res = await create({ "x-tenant": "acme-corp", Authorization: TOKEN, "X-Api-Version": "3" });
    expect(res.status).toBe(201);
    expectEndpointShape(res.body, true);
    expect(res.body.headerNames).toEqual(["Authorization", "X-Api-Version", "x-tenant"]);
    const one = await api.request("GET", `${w.endpoints}/${res.body.id}`);
    const list = await api.request("GET", w.endpoints);
    expect(one.body.headerNames).toEqual(["Authorization", "X-Api-Version", "x-tenant"]);
    expect(list.body.items.find((e: { id: string }) => e.id === res.body.id).headerNames).toEqual(["Authorization", "X-Api-Version", "x-tenant"]);
    const row = await endpointRow(api, res.body.id);
    expect(openEndpointHeaders(api.secretBox, row.headersSealed)).toEqual({ "x-tenant": "acme-corp", Authorization: TOKEN, "X-Api-Version": "3" });
    await expectNowhere(TOKEN, res.body.id, [res.body, one.body, list.body]);
    await expectNowhere("acme-corp", res.body.id, [res.body, one.body, list.body]);
  });

  it("PATCH replaces the whole set, {} clears it, and a PATCH without headers keeps them", async () => {
    const { id } = (await create({ Authorization: TOKEN, "X-Old": "1" })).body;
    const path = `${w.endpoints}/${id}`;
    const replaced = await api.request("PATCH", path, { body: { headers: { "X-New": "2" } } });
    expect(replaced.status).toBe(200);
    expect(replaced.body.headerNames).toEqual(["X-New"]);
    expect(openEndpointHeaders(api.secretBox, (await endpointRow(api, id)).headersSealed)).toEqual({ "X-New": "2" });
    const untouched = await api.request("PATCH", path, { body: { rateLimitPerSecond: 5 } });
    expect(untouched.body).toMatchObject({ headerNames: ["X-New"], rateLimitPerSecond: 5 });
    const cleared = await api.request("PATCH", path, { body: { headers: {} } });
    expect(cleared.body.headerNames).toEqual([]);
    expect((await endpointRow(api, id)).headersSealed).toBeNull();
  });

  it("allows Authorization and up to the limit of headers", async () => {
    const headers = Object.fromEntries(Array.from({ length: MAX_ENDPOINT_HEADERS }, (_, i) => [`X-H${i}`, `v${i}`]));
    const res = await create({ ...headers, "X-H0": undefined, Authorization: "Basic dTpw" });
    expect(res.status).toBe(201);
    expect(res.body.headerNames).toHaveLength(MAX_ENDPOINT_HEADERS);
  });
});

describe("refused headers: 400 with a pointer to the header, nothing stored", () => {
  const reserved = [...RESERVED_HEADER_NAMES.map((n) => n.toUpperCase()), "Content-Type", "webhook-signature", "Proxy-Authorization", "proxy-anything"];
  it.each(reserved)("the reserved name %s", async (name) => {
    const before = await api.prisma.webhookEndpoint.count({ where: { worldId: w.worldId } });
    const res = await create({ Authorization: "ok", [name]: "x" });
    expectProblem(res, 400, "invalid-request");
    expect(res.body.errors).toEqual([{ pointer: `/headers/${name}`, detail: expect.stringContaining(`"${name}" is reserved`) }]);
    expect(await api.prisma.webhookEndpoint.count({ where: { worldId: w.worldId } })).toBe(before);
  });

  it.each([
    ["a name that is not an RFC 9110 token", { "X Bad": "v" }, "/headers/X Bad", /name must match/],
    ["an empty name", { "": "v" }, "/headers/", /name must/],
    ["a value with a line break", { "X-Inject": "a\r\nSet-Cookie: x" }, "/headers/X-Inject", /must match the pattern/],
    ["a value with a tab", { "X-Tab": "a\tb" }, "/headers/X-Tab", /must match the pattern/],
    ["a value outside ASCII", { "X-Name": "Zoë" }, "/headers/X-Name", /must match the pattern/],
    ["a value of 1,025 characters", { "X-Long": "a".repeat(1025) }, "/headers/X-Long", /at most 1024 characters/],
    ["a value that is not a string", { "X-Num": 3 }, "/headers/X-Num", /must be string/],
    ["a name given twice in two cases", { "X-Dup": "1", "x-dup": "2" }, "/headers/x-dup", /repeats "X-Dup"/],
    ["more than 10 headers", Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-${i}`, "v"])), "/headers", /at most 10 members/],
    ["headers that are not an object", ["Authorization: x"], "/headers", /must be object/],
  ])("%s", async (_case, headers, pointer, detail) => {
    const res = await create(headers);
    expectProblem(res, 400, "invalid-request");
    expect(res.body.errors).toEqual([{ pointer, detail: expect.stringMatching(detail) }]);
  });

  it("on PATCH too, leaving the stored set as it was", async () => {
    const { id } = (await create({ "X-Keep": "1" })).body;
    const res = await api.request("PATCH", `${w.endpoints}/${id}`, { body: { headers: { Host: "evil.example" } } });
    expectProblem(res, 400, "invalid-request");
    expect(res.body.errors).toEqual([{ pointer: "/headers/Host", detail: expect.stringContaining('"Host" is reserved') }]);
    expect(openEndpointHeaders(api.secretBox, (await endpointRow(api, id)).headersSealed)).toEqual({ "X-Keep": "1" });
  });
});

describe("the Test action carries them", () => {
  it.each([
    ["directly", () => api],
    ["through DELIVERY_PROXY_URL", () => proxied],
  ])("%s: the receiver gets them beside a signature that verifies; the answer and the history show names only", async (how, harness) => {
    const a = harness();
    const world = a === api ? w : await createWorld(a);
    const created = (await create({ Authorization: TOKEN, "X-Tenant": "acme" }, a, world)).body;
    receiver.setSecret(created.secret);
    const before = receiver.received.length;
    const test = await a.request("POST", `${world.endpoints}/${created.id}/test`, { body: {} });
    expect(test.status).toBe(200);
    expect(test.body.status).toBe(200);
    const [got] = receiver.received.slice(before);
    expect(got?.verifyError).toBeNull();
    expect(got?.headers).toMatchObject({ authorization: TOKEN, "x-tenant": "acme" });
    if (how !== "directly") {
      expect(got?.headers.via).toMatch(/tinyproxy/);
      expect(proxy.requests()).toContain(`POST http://127.0.0.1:${receiver.port}/hook HTTP/1.1`);
    }
    const delivery = await a.request("GET", `${world.endpoints}/${created.id}/deliveries/${test.body.deliveryId}`);
    expect(delivery.status).toBe(200);
    expect(delivery.body.attempts[0].requestHeaders).toMatchObject({ Authorization: "[redacted]", "X-Tenant": "[redacted]" });
    expect(JSON.stringify([test.body, delivery.body])).not.toContain(TOKEN);
    expect(JSON.stringify(a.logs)).not.toContain(TOKEN);
  });
});
