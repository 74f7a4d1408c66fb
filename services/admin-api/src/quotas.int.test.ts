/**
 * Endpoint quotas: MAX_ENDPOINTS_PER_WORLD and MAX_AUTH_ENDPOINTS_PER_WORLD (the harness sets
 * small platform defaults), or the world's own values set by the operator. Going over one is a
 * 409 `quota-exceeded` naming it with its value; concurrent creations never pass it together.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { createWorld, type TestWorld } from "../test/delivery-fixtures.js";

const RECEIVER = "http://127.0.0.1:9/hook";
let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "any", endpointQuotas: { maxEndpoints: 4, maxAuthEndpoints: 2 } });
});
afterAll(async () => {
  await api.close();
});

const create = (w: TestWorld, subscriptions: string[]) => api.request("POST", w.endpoints, { body: { url: RECEIVER, subscriptions } });
const count = (w: TestWorld) => api.prisma.webhookEndpoint.count({ where: { worldId: w.worldId } });
const setQuotas = (w: TestWorld, quotas: Record<string, number | null>) => api.request("PATCH", `/admin/v1/worlds/${w.org}/${w.world}`, { body: { quotas } });

describe("maxEndpoints", () => {
  it("refuses the endpoint after the platform default with 409 quota-exceeded naming the limit and its value, on create and import", async () => {
    const w = await createWorld(api);
    for (let i = 0; i < 4; i += 1) expect((await create(w, ["visitor"])).status).toBe(201);
    const refused = await create(w, ["visitor"]);
    expectProblem(refused, 409, "quota-exceeded");
    expect(refused.body).toMatchObject({ quota: "maxEndpoints", limit: 4 });
    expect(refused.body.detail).toContain("maxEndpoints");
    const imported = await api.request("POST", `${w.endpoints}/import-legacy`, { body: { url: RECEIVER } });
    expectProblem(imported, 409, "quota-exceeded");
    expect(await count(w)).toBe(4);
  });

  it("counts disabled endpoints too, and frees a place when one is deleted", async () => {
    const w = await createWorld(api);
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) ids.push((await create(w, ["visitor"])).body.id);
    await api.request("POST", `${w.endpoints}/${ids[0]}/disable`);
    expect((await create(w, ["visitor"])).status).toBe(409);
    expect((await api.request("DELETE", `${w.endpoints}/${ids[1]}`)).status).toBe(204);
    expect((await create(w, ["visitor"])).status).toBe(201);
  });

  it("takes the world's own limit, set by the operator, over the platform default, and null restores the default", async () => {
    const w = await createWorld(api);
    expect((await setQuotas(w, { maxEndpoints: 6 })).status).toBe(200);
    for (let i = 0; i < 6; i += 1) expect((await create(w, ["visitor"])).status).toBe(201);
    expect((await create(w, ["visitor"])).body).toMatchObject({ quota: "maxEndpoints", limit: 6 });
    await setQuotas(w, { maxEndpoints: 1 });
    // Lowered below what the world has: existing endpoints stay, no new one.
    expect(await count(w)).toBe(6);
    expect((await create(w, ["visitor"])).body).toMatchObject({ quota: "maxEndpoints", limit: 1 });
    await setQuotas(w, { maxEndpoints: null });
    expect((await create(w, ["visitor"])).body).toMatchObject({ quota: "maxEndpoints", limit: 4 });
  });

  it("lets exactly the limit's worth of concurrent creations through", async () => {
    const w = await createWorld(api);
    const answers = await Promise.all(Array.from({ length: 12 }, () => create(w, ["visitor"])));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(4);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(8);
    expect(await count(w)).toBe(4);
  });
});

describe("maxAuthEndpoints", () => {
  it("refuses a third auth subscription on create, import and edit, leaving other subscriptions free", async () => {
    const w = await createWorld(api);
    expect((await create(w, ["auth"])).status).toBe(201);
    expect((await api.request("POST", `${w.endpoints}/import-legacy`, { body: { url: RECEIVER } })).status).toBe(201);
    const refused = await create(w, ["visitor", "auth"]);
    expectProblem(refused, 409, "quota-exceeded");
    expect(refused.body).toMatchObject({ quota: "maxAuthEndpoints", limit: 2, errors: [{ pointer: "/subscriptions", detail: expect.stringContaining("maxAuthEndpoints") }] });
    expectProblem(await api.request("POST", `${w.endpoints}/import-legacy`, { body: { url: RECEIVER } }), 409, "quota-exceeded");
    const visitor = await create(w, ["visitor"]);
    expect(visitor.status).toBe(201);
    const edit = await api.request("PATCH", `${w.endpoints}/${visitor.body.id}`, { body: { subscriptions: ["visitor", "auth"] } });
    expectProblem(edit, 409, "quota-exceeded");
    expect((await api.request("GET", `${w.endpoints}/${visitor.body.id}`)).body.subscriptions).toEqual(["visitor"]);
    expect(await api.prisma.webhookEndpoint.count({ where: { worldId: w.worldId, subscriptions: { has: "auth" } } })).toBe(2);
  });

  it("lets an endpoint that has its auth place keep it when edited, even after the limit was lowered", async () => {
    const w = await createWorld(api);
    const a = await create(w, ["auth"]);
    await create(w, ["auth"]);
    await setQuotas(w, { maxAuthEndpoints: 1 });
    const edit = await api.request("PATCH", `${w.endpoints}/${a.body.id}`, { body: { subscriptions: ["auth", "consent"] } });
    expect(edit.status).toBe(200);
    expect(edit.body.subscriptions).toEqual(["consent", "auth"]);
  });

  it("lets exactly the limit's worth of concurrent auth creations through", async () => {
    const w = await createWorld(api);
    const answers = await Promise.all(Array.from({ length: 8 }, () => create(w, ["auth"])));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 409, 409, 409, 409, 409, 409]);
    expect(await api.prisma.webhookEndpoint.count({ where: { worldId: w.worldId, subscriptions: { has: "auth" } } })).toBe(2);
  });
});
