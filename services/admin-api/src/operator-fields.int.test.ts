/**
 * The operator's fields of a world (`adminEmails`, `customDomain`, `quotas`): only ADMIN_TOKEN
 * changes them. A dashboard session, whatever its capabilities, gets 403 naming each field, and
 * nothing of the patch is applied; the fields a session may set still work.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DASHBOARD_CAPABILITIES } from "@vw/contracts";
import { PUBLIC_ADMIN_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { createWorld, type TestWorld } from "../test/delivery-fixtures.js";
import { asSession, openSession, type OpenedSession } from "../test/dashboard-fixtures.js";

let api: AdminApiHarness;
let w: TestWorld;
let session: OpenedSession;
const worldPath = () => `/admin/v1/worlds/${w.org}/${w.world}`;

beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "any" });
  w = await createWorld(api);
  session = await openSession(api, PUBLIC_ADMIN_URL, w.org, w.world, { capabilities: [...DASHBOARD_CAPABILITIES] });
});
afterAll(async () => {
  await api.close();
});

const stored = async () => {
  const row = await api.prisma.world.findUniqueOrThrow({ where: { id: w.worldId } });
  return {
    name: row.name,
    adminEmails: row.adminEmails,
    customDomain: row.customDomain,
    quotas: [row.maxEndpoints, row.maxAuthEndpoints, row.analyticsBufferMax, row.maxStorageBytes],
    updatedAt: row.updatedAt.toISOString(),
  };
};

describe("a dashboard session with every capability", () => {
  it.each([
    ["adminEmails", { adminEmails: ["attacker@evil.example"] }],
    ["customDomain", { customDomain: "squatted.example.com" }],
    ["customDomain (removing it)", { customDomain: null }],
    ["quotas", { quotas: { maxEndpoints: 100_000 } }],
    ["quotas (storage)", { quotas: { maxStorageBytes: 1024 ** 4 } }],
  ])("cannot set %s: 403 forbidden naming the field, nothing changed", async (_label, body) => {
    const before = await stored();
    const res = await asSession(api, session, PUBLIC_ADMIN_URL)("PATCH", worldPath(), { body });
    expectProblem(res, 403, "forbidden");
    const field = Object.keys(body)[0]!;
    expect(res.body.errors).toEqual([{ pointer: `/${field}`, detail: "is set by the platform operator only (ADMIN_TOKEN)" }]);
    expect(res.body.detail).toContain(field);
    expect(await stored()).toEqual(before);
  });

  it("cannot slip one in beside a field it may set: the whole patch is refused, every operator field named", async () => {
    const before = await stored();
    const res = await asSession(api, session, PUBLIC_ADMIN_URL)("PATCH", worldPath(), {
      body: { name: "Renamed", adminEmails: ["attacker@evil.example"], customDomain: "squatted.example.com" },
    });
    expectProblem(res, 403, "forbidden");
    expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(["/adminEmails", "/customDomain"]);
    expect(await stored()).toEqual(before);
  });

  it("refuses an operator field even with a value the schema would refuse (authorization comes first)", async () => {
    const res = await asSession(api, session, PUBLIC_ADMIN_URL)("PATCH", worldPath(), { body: { adminEmails: "not a list" } });
    expectProblem(res, 403, "forbidden");
  });

  it("still sets the fields it may: name, analytics, identity providers", async () => {
    const res = await asSession(api, session, PUBLIC_ADMIN_URL)("PATCH", worldPath(), {
      body: { name: "Session name", analytics: { enabled: false }, identityProviders: [{ id: "okta", kind: "openid-connect" }] },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "Session name", analytics: { enabled: false }, identityProviders: [{ id: "okta", kind: "openid-connect", exposeAccessToken: false }] });
  });

  it("sees the operator's fields, quotas included", async () => {
    const res = await asSession(api, session, PUBLIC_ADMIN_URL)("GET", worldPath());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ adminEmails: ["a@example.com"], customDomain: null, quotas: { maxEndpoints: null, maxAuthEndpoints: null, analyticsBufferMax: null, maxStorageBytes: null } });
  });
});

describe("the operator (ADMIN_TOKEN)", () => {
  it("sets a world's storage quota past 2^31 bytes, shown as the storage's maxBytes; null restores MAX_STORAGE_BYTES_PER_WORLD", async () => {
    const set = await api.request("PATCH", worldPath(), { body: { quotas: { maxStorageBytes: 20 * 1024 ** 3 } } });
    expect(set.status).toBe(200);
    expect(set.body.quotas.maxStorageBytes).toBe(20 * 1024 ** 3);
    expect(set.body.storage.maxBytes).toBe(20 * 1024 ** 3);
    const reset = await api.request("PATCH", worldPath(), { body: { quotas: { maxStorageBytes: null } } });
    expect(reset.body.storage.maxBytes).toBe(10 * 1024 ** 3);
    expectProblem(await api.request("PATCH", worldPath(), { body: { quotas: { maxStorageBytes: 1024 ** 5 + 1 } } }), 400, "invalid-request");
  });

  it("sets adminEmails, customDomain and quotas; quotas merge member by member and null restores the default", async () => {
    const res = await api.request("PATCH", worldPath(), {
      body: { adminEmails: ["ops@example.com"], customDomain: `${api.slug("d")}.example.com`, quotas: { maxEndpoints: 3, maxAuthEndpoints: 1 } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ adminEmails: ["ops@example.com"], quotas: { maxEndpoints: 3, maxAuthEndpoints: 1, analyticsBufferMax: null, maxStorageBytes: null } });
    const merged = await api.request("PATCH", worldPath(), { body: { quotas: { analyticsBufferMax: 5000, maxEndpoints: null } } });
    expect(merged.body.quotas).toEqual({ maxEndpoints: null, maxAuthEndpoints: 1, analyticsBufferMax: 5000, maxStorageBytes: null });
    expect((await api.request("GET", worldPath())).body.quotas).toEqual(merged.body.quotas);
  });

  it("sets quotas at creation and refuses a quota below 1 with a pointer", async () => {
    const org = api.slug("org");
    await api.request("POST", "/admin/v1/organizations", { body: { slug: org, name: "Org" } });
    const created = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, {
      body: { slug: "q", name: "Q", adminEmails: ["a@example.com"], quotas: { maxAuthEndpoints: 2 } },
    });
    expect(created.status).toBe(201);
    expect(created.body.quotas).toEqual({ maxEndpoints: null, maxAuthEndpoints: 2, analyticsBufferMax: null, maxStorageBytes: null });
    const refused = await api.request("PATCH", `/admin/v1/worlds/${org}/q`, { body: { quotas: { maxEndpoints: 0, extra: 1 } } });
    expectProblem(refused, 400, "invalid-request");
    expect(refused.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(["/quotas/extra", "/quotas/maxEndpoints"]);
  });
});
