/**
 * What a dashboard session may reach on `/admin/v1`: the capability each route needs (allowed with
 * it, 403 without it), CSRF (Origin) on every state-changing request, and world isolation (a
 * session of world A never reads or changes world B, whatever path or ids it sends).
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DASHBOARD_CAPABILITIES, type DashboardCapability } from "@vw/contracts";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { PUBLIC_ADMIN_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { createCurrentEndpoint, createWorld, deliveryRow, insertDelivery, type TestWorld } from "../test/delivery-fixtures.js";
import { asSession, openSession, type OpenedSession } from "../test/dashboard-fixtures.js";

const ORIGIN = PUBLIC_ADMIN_URL;
let api: AdminApiHarness;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
  api = await startAdminApi({ endpointUrlPolicy: "any" });
});
afterAll(async () => {
  await api.close();
  await receiver.close();
});

/** A request a dashboard might make, prepared (with fresh resources) by the operator. */
interface Operation {
  name: string;
  capability: DashboardCapability;
  prepare(w: TestWorld): Promise<{ method: string; path: string; body?: unknown; status: number }>;
}

const worldPath = (w: TestWorld) => `/admin/v1/worlds/${w.org}/${w.world}`;
const freshEndpoint = async (w: TestWorld) => (await createCurrentEndpoint(api, w, receiver.url)).id;
const freshKey = async (w: TestWorld) => (await api.request("POST", `${worldPath(w)}/api-keys`, { body: { name: "k" } })).body.id as string;
const freshDelivery = async (w: TestWorld) => {
  const endpointId = await freshEndpoint(w);
  return { endpointId, deliveryId: await insertDelivery(api, { endpointId, worldId: w.worldId, status: "failed" }) };
};

const OPERATIONS: Operation[] = [
  { name: "read the world", capability: "view", prepare: async (w) => ({ method: "GET", path: worldPath(w), status: 200 }) },
  { name: "list API keys", capability: "view", prepare: async (w) => ({ method: "GET", path: `${worldPath(w)}/api-keys`, status: 200 }) },
  { name: "list endpoints", capability: "view", prepare: async (w) => ({ method: "GET", path: w.endpoints, status: 200 }) },
  { name: "read an endpoint", capability: "view", prepare: async (w) => ({ method: "GET", path: `${w.endpoints}/${await freshEndpoint(w)}`, status: 200 }) },
  {
    name: "read a delivery",
    capability: "view",
    prepare: async (w) => {
      const d = await freshDelivery(w);
      return { method: "GET", path: `${w.endpoints}/${d.endpointId}/deliveries/${d.deliveryId}`, status: 200 };
    },
  },
  { name: "change the world's settings", capability: "manage-endpoints", prepare: async (w) => ({ method: "PATCH", path: worldPath(w), body: { name: "Renamed" }, status: 200 }) },
  { name: "create an endpoint", capability: "manage-endpoints", prepare: async (w) => ({ method: "POST", path: w.endpoints, body: { url: receiver.url, subscriptions: ["visitor"] }, status: 201 }) },
  { name: "import a legacy endpoint", capability: "manage-endpoints", prepare: async (w) => ({ method: "POST", path: `${w.endpoints}/import-legacy`, body: { url: receiver.url }, status: 201 }) },
  { name: "edit an endpoint", capability: "manage-endpoints", prepare: async (w) => ({ method: "PATCH", path: `${w.endpoints}/${await freshEndpoint(w)}`, body: { subscriptions: ["visitor"] }, status: 200 }) },
  { name: "delete an endpoint", capability: "manage-endpoints", prepare: async (w) => ({ method: "DELETE", path: `${w.endpoints}/${await freshEndpoint(w)}`, status: 204 }) },
  { name: "disable an endpoint", capability: "manage-endpoints", prepare: async (w) => ({ method: "POST", path: `${w.endpoints}/${await freshEndpoint(w)}/disable`, status: 200 }) },
  { name: "enable an endpoint", capability: "manage-endpoints", prepare: async (w) => ({ method: "POST", path: `${w.endpoints}/${await freshEndpoint(w)}/enable`, status: 200 }) },
  { name: "rotate a secret", capability: "manage-endpoints", prepare: async (w) => ({ method: "POST", path: `${w.endpoints}/${await freshEndpoint(w)}/rotate-secret`, status: 200 }) },
  { name: "switch the format", capability: "manage-endpoints", prepare: async (w) => ({ method: "PUT", path: `${w.endpoints}/${await freshEndpoint(w)}/format`, body: { format: "legacy" }, status: 200 }) },
  { name: "create an API key", capability: "manage-api-keys", prepare: async (w) => ({ method: "POST", path: `${worldPath(w)}/api-keys`, body: { name: "ci" }, status: 201 }) },
  { name: "revoke an API key", capability: "manage-api-keys", prepare: async (w) => ({ method: "DELETE", path: `${worldPath(w)}/api-keys/${await freshKey(w)}`, status: 204 }) },
  { name: "Test an endpoint", capability: "send", prepare: async (w) => ({ method: "POST", path: `${w.endpoints}/${await freshEndpoint(w)}/test`, body: {}, status: 200 }) },
  {
    name: "Replay a delivery",
    capability: "send",
    prepare: async (w) => {
      const d = await freshDelivery(w);
      return { method: "POST", path: `${w.endpoints}/${d.endpointId}/deliveries/${d.deliveryId}/replay`, status: 202 };
    },
  },
  {
    name: "recover an endpoint",
    capability: "send",
    prepare: async (w) => ({ method: "POST", path: `${w.endpoints}/${await freshEndpoint(w)}/recover`, body: { since: "2026-01-01T00:00:00Z" }, status: 202 }),
  },
  {
    name: "preview a recover (dry run)",
    capability: "send",
    prepare: async (w) => ({ method: "POST", path: `${w.endpoints}/${await freshEndpoint(w)}/recover`, body: { since: "2026-01-01T00:00:00Z", dryRun: true }, status: 200 }),
  },
  {
    name: "read a recovery",
    capability: "view",
    prepare: async (w) => {
      const id = await freshEndpoint(w);
      const started = await api.request("POST", `${w.endpoints}/${id}/recover`, { body: { since: "2026-01-01T00:00:00Z" } });
      return { method: "GET", path: `${w.endpoints}/${id}/recoveries/${started.body.id}`, status: 200 };
    },
  },
];

let world: TestWorld;
const sessions = new Map<string, OpenedSession>();
/** A session of `world` with exactly `capabilities` (view implied), opened once per set. */
async function sessionWith(capabilities: DashboardCapability[]): Promise<OpenedSession> {
  const key = capabilities.join(",");
  let opened = sessions.get(key);
  if (!opened) {
    opened = await openSession(api, ORIGIN, world.org, world.world, { capabilities });
    sessions.set(key, opened);
  }
  return opened;
}

describe("capabilities", () => {
  beforeAll(async () => {
    world = await createWorld(api);
  });

  it.each(OPERATIONS.map((op) => [op.name, op] as const))("%s: allowed with its capability", async (_name, op) => {
    const request = await op.prepare(world);
    const res = await asSession(api, await sessionWith([op.capability]), ORIGIN)(request.method, request.path, request.body === undefined ? {} : { body: request.body });
    expect({ status: res.status, body: res.body }).toEqual({ status: request.status, body: res.body });
  });

  it.each(OPERATIONS.filter((op) => op.capability !== "view").map((op) => [op.name, op] as const))(
    "%s: 403 with every capability but its own, and 403 for a view-only session; nothing changes",
    async (_name, op) => {
      const others = DASHBOARD_CAPABILITIES.filter((c) => c !== op.capability);
      for (const capabilities of [others, ["view"] as DashboardCapability[]]) {
        const request = await op.prepare(world);
        const res = await asSession(api, await sessionWith(capabilities), ORIGIN)(request.method, request.path, request.body === undefined ? {} : { body: request.body });
        expectProblem(res, 403, "missing-capability");
        expect(res.body.capability).toBe(op.capability);
        // The refused request changed nothing: the operator can still do exactly it.
        const again = await api.request(request.method, request.path, request.body === undefined ? {} : { body: request.body });
        expect(again.status).toBe(request.status);
      }
    },
  );

  it("never opens operator-only routes to a session, whatever its capabilities", async () => {
    const call = asSession(api, await sessionWith([...DASHBOARD_CAPABILITIES]), ORIGIN);
    for (const [method, path] of [
      ["POST", `${worldPath(world)}/dashboard-sessions`],
      ["DELETE", `${worldPath(world)}/dashboard-sessions`],
      ["GET", "/admin/v1/organizations"],
      ["GET", `/admin/v1/organizations/${world.org}`],
      ["GET", `/admin/v1/organizations/${world.org}/worlds`],
      ["POST", "/admin/v1/organizations"],
      ["POST", `/admin/v1/organizations/${world.org}/worlds`],
    ] as const) {
      expectProblem(await call(method, path, method === "POST" ? { body: { slug: "x", name: "x" } } : {}), 403, "forbidden");
    }
  });
});

describe("CSRF", () => {
  it("refuses every state-changing session request without the dashboard's Origin; reads need none", async () => {
    const w = await createWorld(api);
    const opened = await openSession(api, ORIGIN, w.org, w.world);
    const id = (await createCurrentEndpoint(api, w, receiver.url)).id;
    for (const origin of [null, "https://evil.example.com", "null", `${ORIGIN}:8443`, "http://admin.example.test"]) {
      const call = asSession(api, opened, origin);
      expectProblem(await call("POST", `${w.endpoints}/${id}/disable`), 403, "cross-origin-request");
      expectProblem(await call("DELETE", `${w.endpoints}/${id}`), 403, "cross-origin-request");
      expectProblem(await call("PATCH", worldPath(w), { body: { name: "x" } }), 403, "cross-origin-request");
      expectProblem(await call("POST", `${worldPath(w)}/api-keys`, { body: {} }), 403, "cross-origin-request");
      expect((await call("GET", `${w.endpoints}/${id}`)).body).toMatchObject({ id, enabled: true });
    }
    expect((await api.request("GET", `${worldPath(w)}/api-keys`)).body.items).toEqual([]);
    expect((await asSession(api, opened, ORIGIN)("POST", `${w.endpoints}/${id}/disable`)).status).toBe(200);
  });

  it("judges a request with an Authorization header on that header alone", async () => {
    const w = await createWorld(api);
    const opened = await openSession(api, ORIGIN, w.org, w.world);
    const res = await asSession(api, opened, ORIGIN)("GET", worldPath(w), { headers: { authorization: "Bearer not-the-admin-token" } });
    expectProblem(res, 401, "invalid-token");
  });
});

describe("world isolation", () => {
  let a: TestWorld;
  let b: TestWorld;
  let b2: TestWorld;
  let session: OpenedSession;
  let bEndpoint: string;
  let bDelivery: string;
  let bKey: string;
  let aEndpoint: string;

  beforeAll(async () => {
    a = await createWorld(api);
    b = await createWorld(api);
    // Same organization as A, another world.
    const sibling = await api.request("POST", `/admin/v1/organizations/${a.org}/worlds`, { body: { slug: "other", name: "Other", adminEmails: ["o@example.com"] } });
    expect(sibling.status).toBe(201);
    b2 = { org: a.org, world: "other", endpoints: `/admin/v1/worlds/${a.org}/other/endpoints`, worldId: sibling.body.id };
    session = await openSession(api, ORIGIN, a.org, a.world);
    aEndpoint = (await createCurrentEndpoint(api, a, receiver.url)).id;
    bEndpoint = (await createCurrentEndpoint(api, b, receiver.url)).id;
    bDelivery = await insertDelivery(api, { endpointId: bEndpoint, worldId: b.worldId, status: "failed" });
    bKey = (await api.request("POST", `${worldPath(b)}/api-keys`, { body: { name: "b" } })).body.id;
  });

  it("answers 404 for another world's paths, as for a world that does not exist", async () => {
    const call = asSession(api, session, ORIGIN);
    for (const other of [b, b2]) {
      for (const [method, path, body] of [
        ["GET", worldPath(other)],
        ["PATCH", worldPath(other), { name: "pwned" }],
        ["GET", `${worldPath(other)}/api-keys`],
        ["POST", `${worldPath(other)}/api-keys`, {}],
        ["GET", other.endpoints],
        ["POST", other.endpoints, { url: receiver.url, subscriptions: ["recording"] }],
        ["GET", `${other.endpoints}/${bEndpoint}`],
        ["DELETE", `${other.endpoints}/${bEndpoint}`],
        ["GET", `${other.endpoints}/${bEndpoint}/deliveries`],
        ["POST", `${other.endpoints}/${bEndpoint}/deliveries/${bDelivery}/replay`],
        ["POST", `${other.endpoints}/${bEndpoint}/recover`, { since: "2026-01-01T00:00:00Z" }],
      ] as const) {
        const res = await call(method, path, body === undefined ? {} : { body });
        expectProblem(res, 404, "not-found");
        // A problem document and nothing else: no member of the other world's data.
        expect(Object.keys(res.body).sort()).toEqual(["detail", "instance", "status", "title", "type"]);
      }
    }
    // Case and encoding variants of the own world's slugs name no other world either.
    expectProblem(await call("GET", `/admin/v1/worlds/${a.org.toUpperCase()}/${a.world}`), 404);
    expectProblem(await call("GET", `/admin/v1/worlds/${b.org}%2F${b.world}/x/endpoints`), 404);
    expectProblem(await call("GET", `/admin/v1/worlds/${encodeURIComponent(b.org)}/${b.world}/endpoints`), 404);
  });

  it("answers 404 for another world's ids under its own world's path, and changes nothing", async () => {
    const call = asSession(api, session, ORIGIN);
    const before = (await api.request("GET", `${b.endpoints}/${bEndpoint}`)).body;
    for (const [method, path, body] of [
      ["GET", `${a.endpoints}/${bEndpoint}`],
      ["PATCH", `${a.endpoints}/${bEndpoint}`, { url: "https://attacker.example.com/x" }],
      ["POST", `${a.endpoints}/${bEndpoint}/disable`],
      ["POST", `${a.endpoints}/${bEndpoint}/rotate-secret`],
      ["PUT", `${a.endpoints}/${bEndpoint}/format`, { format: "legacy" }],
      ["POST", `${a.endpoints}/${bEndpoint}/test`, {}],
      ["GET", `${a.endpoints}/${bEndpoint}/deliveries`],
      ["GET", `${a.endpoints}/${bEndpoint}/deliveries/${bDelivery}`],
      ["GET", `${a.endpoints}/${aEndpoint}/deliveries/${bDelivery}`],
      ["POST", `${a.endpoints}/${aEndpoint}/deliveries/${bDelivery}/replay`],
      ["POST", `${a.endpoints}/${bEndpoint}/recover`, { since: "2026-01-01T00:00:00Z" }],
      ["POST", `${a.endpoints}/${bEndpoint}/recover`, { since: "2026-01-01T00:00:00Z", dryRun: true }],
      ["GET", `${worldPath(a)}/api-keys/${bKey}`],
      ["DELETE", `${worldPath(a)}/api-keys/${bKey}`],
      ["DELETE", `${a.endpoints}/${bEndpoint}`],
    ] as const) {
      const res = await call(method, path, body === undefined ? {} : { body });
      expectProblem(res, 404);
    }
    expect((await api.request("GET", `${b.endpoints}/${bEndpoint}`)).body).toEqual(before);
    expect((await api.request("GET", `${worldPath(b)}/api-keys/${bKey}`)).body.revokedAt).toBeNull();
    expect(await deliveryRow(api, bDelivery)).toMatchObject({ status: "failed", run: 0 });
    expect(await api.prisma.deliveryRecovery.count({ where: { endpointId: bEndpoint } })).toBe(0);
  });
});
