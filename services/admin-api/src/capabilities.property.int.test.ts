/**
 * Property: whatever its capabilities, a dashboard session's request (any route of its world, any
 * body, operator fields included) changes only what one of its capabilities covers, and a refused
 * request changes nothing. The coverage below is the README's table ("What each capability
 * allows"), written here on its own, not read from the implementation: a route or field the
 * implementation opens too widely shows up as a change no capability of the session covers.
 *
 * Each case snapshots everything stored for the world (its settings and quotas, endpoints, API
 * keys, deliveries, recoveries, sessions), sends one generated request with the session's cookie,
 * and compares. `FUZZ_SEED`/`FUZZ_RUNS` replay or resize a run (packages/testing fuzz.ts).
 */
import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import fc from "fast-check";
import { DASHBOARD_CAPABILITIES, WEBHOOK_SUBSCRIPTIONS, type DashboardCapability } from "@vw/contracts";
import { fuzzRuns, fuzzSeed, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { PUBLIC_ADMIN_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { createWorld, insertDelivery, type TestWorld } from "../test/delivery-fixtures.js";
import { asSession, openSession, type OpenedSession } from "../test/dashboard-fixtures.js";

/** What a stored change is about. */
type Field =
  | "world.name" | "world.analytics" | "world.identityProviders" | "world.adminEmails" | "world.customDomain" | "world.quotas"
  | "endpoint.created" | "endpoint.deleted" | "endpoint.settings" | "endpoint.state" | "endpoint.secret" | "endpoint.format"
  | "apiKey.created" | "apiKey.revoked"
  | "delivery.created" | "delivery.deleted" | "delivery.status"
  | "recovery.created"
  | "session.changed";

/**
 * Which capabilities may cause each change ("operator": none). Disabling or deleting an endpoint
 * takes its waiting deliveries with it, so delivery status and removal are also manage-endpoints'.
 */
const COVERED_BY: Record<Field, readonly DashboardCapability[]> = {
  "world.name": ["manage-endpoints"],
  "world.analytics": ["manage-endpoints"],
  "world.identityProviders": ["manage-endpoints"],
  "world.adminEmails": [],
  "world.customDomain": [],
  "world.quotas": [],
  "endpoint.created": ["manage-endpoints"],
  "endpoint.deleted": ["manage-endpoints"],
  "endpoint.settings": ["manage-endpoints"],
  "endpoint.state": ["manage-endpoints"],
  "endpoint.secret": ["manage-endpoints"],
  "endpoint.format": ["manage-endpoints"],
  "apiKey.created": ["manage-api-keys"],
  "apiKey.revoked": ["manage-api-keys"],
  "delivery.created": ["send"],
  "delivery.deleted": ["manage-endpoints"],
  "delivery.status": ["send", "manage-endpoints"],
  "recovery.created": ["send"],
  "session.changed": [],
};

let api: AdminApiHarness;
let receiver: WebhookReceiver;
let w: TestWorld;
const sessions = new Map<string, OpenedSession>();

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  // High quotas: the runs pile endpoints up in one world, and only the operator could raise them.
  api = await startAdminApi({ endpointUrlPolicy: "any", endpointQuotas: { maxEndpoints: 10_000, maxAuthEndpoints: 10_000 } });
  w = await createWorld(api);
});
afterAll(async () => {
  await api.close();
  await receiver.close();
});

const worldPath = () => `/admin/v1/worlds/${w.org}/${w.world}`;
const digest = (value: string | null) => (value === null ? null : createHash("sha256").update(value).digest("hex").slice(0, 12));

/** Everything stored for the world, keyed so that two snapshots can be compared field by field. */
async function snapshot() {
  const world = await api.prisma.world.findUniqueOrThrow({ where: { id: w.worldId } });
  const endpoints = await api.prisma.webhookEndpoint.findMany({ where: { worldId: w.worldId } });
  const keys = await api.prisma.apiKey.findMany({ where: { worldId: w.worldId } });
  // By endpoint, not by world: the log has no index on world_id, and the shared test database holds
  // every other test file's deliveries too, so a scan by world grew slower with each file run before.
  const endpointIds = endpoints.map((e) => e.id);
  const deliveries = await api.prisma.webhookDelivery.findMany({ where: { endpointId: { in: endpointIds } }, select: { id: true } });
  // A delivery's state (none: delivered); the run moves on each Replay or recover, whatever the status.
  const states = await api.prisma.deliveryState.findMany({ where: { deliveryId: { in: deliveries.map((d) => d.id) } }, select: { deliveryId: true, status: true, attemptCount: true, run: true } });
  const stateOf = new Map(states.map((s) => [s.deliveryId, `${s.status}/${s.attemptCount}/run ${s.run}`]));
  const recoveries = await api.prisma.deliveryRecovery.count({ where: { endpoint: { worldId: w.worldId } } });
  const dashboardSessions = await api.prisma.dashboardSession.findMany({ where: { worldId: w.worldId }, select: { id: true, tokenHash: true } });
  return {
    world: {
      name: world.name,
      analytics: JSON.stringify(world.analytics),
      identityProviders: JSON.stringify(world.identityProviders),
      adminEmails: JSON.stringify(world.adminEmails),
      customDomain: world.customDomain,
      quotas: JSON.stringify([world.maxEndpoints, world.maxAuthEndpoints, world.analyticsBufferMax]),
    },
    endpoints: new Map(
      endpoints.map((e) => [
        e.id,
        {
          settings: JSON.stringify([e.url, e.subscriptions, e.rateLimitPerSecond]),
          state: JSON.stringify([e.enabled, e.disabledReason]),
          secret: JSON.stringify([digest(e.secretSealed), e.secretVersion]),
          format: e.format,
        },
      ]),
    ),
    keys: new Map(keys.map((k) => [k.id, k.revokedAt?.toISOString() ?? null])),
    deliveries: new Map(deliveries.map((d) => [d.id, stateOf.get(d.id) ?? "delivered"])),
    recoveries,
    sessions: JSON.stringify(dashboardSessions.map((s) => [s.id, s.tokenHash]).sort()),
  };
}
type Snapshot = Awaited<ReturnType<typeof snapshot>>;

/** The fields that differ between two snapshots. */
function changes(before: Snapshot, after: Snapshot): Field[] {
  const out = new Set<Field>();
  for (const key of Object.keys(before.world) as (keyof Snapshot["world"])[]) if (before.world[key] !== after.world[key]) out.add(`world.${key}` as Field);
  for (const [id, e] of after.endpoints) {
    const old = before.endpoints.get(id);
    if (!old) out.add("endpoint.created");
    else for (const part of ["settings", "state", "secret", "format"] as const) if (old[part] !== e[part]) out.add(`endpoint.${part}`);
  }
  for (const id of before.endpoints.keys()) if (!after.endpoints.has(id)) out.add("endpoint.deleted");
  for (const [id, revoked] of after.keys) {
    if (!before.keys.has(id)) out.add("apiKey.created");
    else if (before.keys.get(id) !== revoked) out.add("apiKey.revoked");
  }
  for (const [id, state] of after.deliveries) {
    if (!before.deliveries.has(id)) out.add("delivery.created");
    else if (before.deliveries.get(id) !== state) out.add("delivery.status");
  }
  for (const id of before.deliveries.keys()) if (!after.deliveries.has(id)) out.add("delivery.deleted");
  if (after.recoveries !== before.recoveries) out.add("recovery.created");
  if (after.sessions !== before.sessions) out.add("session.changed");
  return [...out].sort();
}

/** A session of the world with exactly `capabilities` (view is always added), opened once per set. */
async function sessionWith(capabilities: readonly DashboardCapability[]): Promise<OpenedSession> {
  const granted = [...new Set<DashboardCapability>(["view", ...capabilities])].sort();
  const key = granted.join(",");
  let opened = sessions.get(key);
  if (!opened) {
    opened = await openSession(api, PUBLIC_ADMIN_URL, w.org, w.world, { capabilities: granted });
    sessions.set(key, opened);
  }
  return opened;
}

/** Resources an operation needs, made by the operator before the snapshot. */
async function freshEndpoint(subscriptions: string[] = ["visitor"]): Promise<string> {
  const res = await api.request("POST", `${worldPath()}/endpoints`, { body: { url: receiver.url, subscriptions } });
  if (res.status !== 201) throw new Error(`operator could not create an endpoint: ${res.status} ${res.text}`);
  return res.body.id;
}
async function freshKey(): Promise<string> {
  return (await api.request("POST", `${worldPath()}/api-keys`, { body: { name: "k" } })).body.id;
}
async function failedDelivery(): Promise<{ endpointId: string; deliveryId: string }> {
  const endpointId = await freshEndpoint();
  return { endpointId, deliveryId: await insertDelivery(api, { endpointId, worldId: w.worldId, status: "failed" }) };
}

/** One generated request: how to prepare it (as the operator), then what the session sends. */
interface Operation {
  name: string;
  request(): Promise<{ method: string; path: string; body?: unknown }>;
}

const subscriptions = fc.subarray([...WEBHOOK_SUBSCRIPTIONS], { minLength: 1 });
const worldPatch = fc.record(
  {
    name: fc.constantFrom("Renamed", "Other name"),
    analytics: fc.record({ enabled: fc.boolean(), categories: fc.record({ collaboration: fc.boolean() }, { requiredKeys: [] }) }, { requiredKeys: [] }),
    identityProviders: fc.constantFrom([], [{ id: "okta", kind: "openid-connect", exposeAccessToken: true }]),
    adminEmails: fc.constantFrom(["attacker@evil.example"], ["ops@example.com", "x@example.com"]),
    customDomain: fc.constantFrom(null, "DOMAIN"),
    quotas: fc.record({ maxEndpoints: fc.constantFrom(1, 100_000, null), maxAuthEndpoints: fc.constantFrom(1, null), analyticsBufferMax: fc.constantFrom(1, null) }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
);

const operation: fc.Arbitrary<Operation> = fc.oneof(
  {
    // The world's settings carry the operator's fields: drawn as often as the endpoint routes together.
    weight: 8,
    arbitrary: worldPatch.map((body) => ({
      name: `PATCH world ${JSON.stringify(body)}`,
      request: async () => ({ method: "PATCH", path: worldPath(), body: { ...body, ...(body.customDomain === "DOMAIN" ? { customDomain: `${randomBytes(4).toString("hex")}.example.com` } : {}) } }),
    })),
  },
  fc.constant({ name: "GET world", request: async () => ({ method: "GET", path: worldPath() }) }),
  fc.constant({ name: "create API key", request: async () => ({ method: "POST", path: `${worldPath()}/api-keys`, body: { name: "session key" } }) }),
  fc.constant({ name: "revoke API key", request: async () => ({ method: "DELETE", path: `${worldPath()}/api-keys/${await freshKey()}` }) }),
  fc.record({ subscriptions, rate: fc.option(fc.integer({ min: 1, max: 50 }), { nil: undefined }) }).map(({ subscriptions: subs, rate }) => ({
    name: `create endpoint ${subs.join(",")}`,
    request: async () => ({ method: "POST", path: `${worldPath()}/endpoints`, body: { url: receiver.url, subscriptions: subs, ...(rate === undefined ? {} : { rateLimitPerSecond: rate }) } }),
  })),
  fc.constant({ name: "import legacy endpoint", request: async () => ({ method: "POST", path: `${worldPath()}/endpoints/import-legacy`, body: { url: receiver.url } }) }),
  fc.record({ subscriptions: fc.option(subscriptions, { nil: undefined }), rate: fc.option(fc.option(fc.integer({ min: 1, max: 50 }), { nil: null }), { nil: undefined }) }).map(({ subscriptions: subs, rate }) => ({
    name: "edit endpoint",
    request: async () => ({
      method: "PATCH",
      path: `${worldPath()}/endpoints/${await freshEndpoint()}`,
      body: { ...(subs === undefined ? {} : { subscriptions: subs }), ...(rate === undefined ? {} : { rateLimitPerSecond: rate }) },
    }),
  })),
  fc.constantFrom("disable", "enable", "rotate-secret", "test").map((action) => ({
    name: `${action} endpoint`,
    request: async () => ({ method: "POST", path: `${worldPath()}/endpoints/${await freshEndpoint()}/${action}`, ...(action === "test" ? { body: {} } : {}) }),
  })),
  fc.constant({ name: "delete endpoint", request: async () => ({ method: "DELETE", path: `${worldPath()}/endpoints/${await freshEndpoint()}` }) }),
  fc.constantFrom("legacy", "current").map((format) => ({
    name: `format ${format}`,
    request: async () => ({ method: "PUT", path: `${worldPath()}/endpoints/${await freshEndpoint()}/format`, body: { format } }),
  })),
  fc.constant({
    name: "replay",
    request: async () => {
      const d = await failedDelivery();
      return { method: "POST", path: `${worldPath()}/endpoints/${d.endpointId}/deliveries/${d.deliveryId}/replay` };
    },
  }),
  fc.boolean().map((dryRun) => ({
    name: `recover${dryRun ? " (dry run)" : ""}`,
    request: async () => ({ method: "POST", path: `${worldPath()}/endpoints/${(await failedDelivery()).endpointId}/recover`, body: { since: "2026-01-01T00:00:00Z", dryRun } }),
  })),
  fc.constantFrom("POST", "DELETE").map((method) => ({ name: `${method} dashboard-sessions`, request: async () => ({ method, path: `${worldPath()}/dashboard-sessions`, body: {} }) })),
  fc.constant({ name: "create organization", request: async () => ({ method: "POST", path: "/admin/v1/organizations", body: { slug: `x${randomBytes(3).toString("hex")}`, name: "X" } }) }),
);

/**
 * Where one case's time went, printed when it took over {@link SLOW_CASE_MS}: a run that nears
 * the test's timeout on a busy machine then says which step was slow, instead of only that the
 * whole property ran out of time.
 */
const SLOW_CASE_MS = 5_000;
function timedPhases() {
  const spent: [string, number][] = [];
  return {
    async run<T>(name: string, step: () => Promise<T>): Promise<T> {
      const t0 = performance.now();
      try {
        return await step();
      } finally {
        spent.push([name, Math.round(performance.now() - t0)]);
      }
    },
    reportIfSlow(operation: string) {
      const total = spent.reduce((sum, [, ms]) => sum + ms, 0);
      if (total > SLOW_CASE_MS) console.warn(`[capabilities] slow case "${operation}": ${total} ms (${spent.map(([n, ms]) => `${n} ${ms} ms`).join(", ")})`);
    },
  };
}

describe("dashboard sessions", () => {
  it("never change what their capabilities do not cover, whatever route and body; refused requests change nothing", async () => {
    const seed = fuzzSeed("capability boundaries");
    const seen = { allowedChanges: 0, refused: 0 };
    await fc.assert(
      fc.asyncProperty(fc.subarray([...DASHBOARD_CAPABILITIES]), operation, async (capabilities, op) => {
        const phases = timedPhases();
        const session = await phases.run("session", () => sessionWith(capabilities));
        const request = await phases.run("prepare", () => op.request());
        const before = await phases.run("snapshot before", () => snapshot());
        const res = await phases.run("request", () => asSession(api, session, PUBLIC_ADMIN_URL)(request.method, request.path, request.body === undefined ? {} : { body: request.body }));
        // Test, Replay and recover write their rows before answering; nothing else is in flight.
        const after = await phases.run("snapshot after", () => snapshot());
        phases.reportIfSlow(op.name);
        const granted = new Set<DashboardCapability>(["view", ...capabilities]);
        const changed = changes(before, after);
        const uncovered = changed.filter((field) => !COVERED_BY[field].some((c) => granted.has(c)));
        const context = { operation: op.name, capabilities: [...granted], status: res.status, changed };
        expect({ ...context, uncovered }).toEqual({ ...context, uncovered: [] });
        expect(res.status).toBeLessThan(500);
        if (res.status >= 400) expect({ ...context, changedWhileRefused: changed }).toEqual({ ...context, changedWhileRefused: [] });
        if (res.status === 403) seen.refused += 1;
        if (res.status < 300 && changed.length > 0) seen.allowedChanges += 1;
      }),
      { seed, numRuns: fuzzRuns(150), endOnFailure: true },
    );
    // Not vacuous: the run both let sessions change things and refused them.
    expect(seen.allowedChanges).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
    // A bound on a hang, not on speed: 150 cases take seconds alone and far longer beside the suite.
  }, 600_000);
});
