/**
 * Failed authentication on admin-api is throttled per client (counters in Redis): wrong admin
 * tokens, unknown Inbound API keys, unknown dashboard codes. Past AUTH_FAILURES_MAX a client gets
 * 429 with Retry-After and a problem document for any credential (its valid one too); other
 * clients are not slowed. The harness trusts the loopback proxy, so X-Forwarded-For names clients.
 * A burst of 300 concurrent guesses gets at most AUTH_FAILURES_MAX of them checked, for each kind
 * of credential, so the right one inside the burst is refused with the others.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createRedisConnection } from "@vw/queues";
import { credentialBurst, type BurstOutcome } from "@vw/testing";
import { PUBLIC_ADMIN_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { createWorld, type TestWorld } from "../test/delivery-fixtures.js";
import { codeOf, exchange, mintLink } from "../test/dashboard-fixtures.js";

const MAX = 3;
let api: AdminApiHarness;
let w: TestWorld;
let counter = 0;
/** A fresh client address for each test, so tests never share a counter. */
const client = () => ({ "x-forwarded-for": `198.51.100.${(counter += 1)}` });

beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "any", authThrottle: { maxFailures: MAX, windowMs: 60_000 }, trustProxy: ["loopback"] });
  w = await createWorld(api);
});
afterAll(async () => {
  await api.close();
});

function expectThrottled(res: { status: number; headers: Headers; body: any }): void {
  expectProblem(res as never, 429, "too-many-failed-attempts");
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(60);
}

describe("the admin token", () => {
  it("answers 401 up to the limit, then 429 to that client whatever it sends, the right token included; other clients go on", async () => {
    const attacker = client();
    for (let i = 0; i < MAX; i += 1) expectProblem(await api.request("GET", "/admin/v1/organizations", { token: `guess-${i}`, headers: attacker }), 401, "invalid-token");
    expectThrottled(await api.request("GET", "/admin/v1/organizations", { token: "guess-last", headers: attacker }));
    expectThrottled(await api.request("GET", "/admin/v1/organizations", { headers: attacker }));
    expect((await api.request("GET", "/admin/v1/organizations", { headers: client() })).status).toBe(200);
    // The counter is one Redis key under the service's prefix, so every replica sees it.
    const redis = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "worker");
    try {
      expect(await redis.hget(`${api.redisKeyPrefix}:auth-failures:admin-token:${attacker["x-forwarded-for"]}`, "failures")).toBe(String(MAX));
    } finally {
      await redis.quit();
    }
  });

  it("does not count requests without a token", async () => {
    const someone = client();
    for (let i = 0; i < MAX + 2; i += 1) expectProblem(await api.request("GET", "/admin/v1/organizations", { token: null, headers: someone }), 401, "missing-token");
    expect((await api.request("GET", "/admin/v1/organizations", { headers: someone })).status).toBe(200);
  });
});

describe("Inbound API keys", () => {
  it("throttles a client sending unknown keys; the world's real key from another client still works", async () => {
    const key = await api.request("POST", `/admin/v1/worlds/${w.org}/${w.world}/api-keys`, { body: { name: "receiver" } });
    const member = `/api/v1/worlds/${w.world}/members/c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b`;
    const attacker = client();
    for (let i = 0; i < MAX; i += 1) expectProblem(await api.request("GET", member, { token: `vwk_guess${i}`, headers: attacker }), 401, "invalid-token");
    expectThrottled(await api.request("GET", member, { token: key.body.token, headers: attacker }));
    expectProblem(await api.request("GET", member, { token: key.body.token, headers: client() }), 404, "not-found");
  });
});

describe("dashboard codes", () => {
  it("throttles a client guessing link codes; a used code does not count, and other clients open their links", async () => {
    const attacker = client();
    const used = await mintLink(api, w.org, w.world);
    const usedCode = codeOf(used.body.url);
    expect((await exchange(api, PUBLIC_ADMIN_URL, usedCode)).status).toBe(200);
    const post = (code: string, headers: Record<string, string>) =>
      api.request("POST", "/dashboard/api/session", { token: null, body: { code }, headers: { origin: PUBLIC_ADMIN_URL, ...headers } });
    for (let i = 0; i < MAX + 2; i += 1) expectProblem(await post(usedCode, attacker), 410, "dashboard-link-used");
    for (let i = 0; i < MAX; i += 1) expectProblem(await post(`guess${i}`.padEnd(43, "x"), attacker), 401, "dashboard-link-invalid");
    const fresh = codeOf((await mintLink(api, w.org, w.world)).body.url);
    expectThrottled(await post(fresh, attacker));
    expect((await post(fresh, client())).status).toBe(200);
  });
});

/** 300 requests at once: seconds on a machine whose cores are busy with other work (jest's default is 30 s). */
const BURST_TIMEOUT_MS = 120_000;

describe("a burst of 300 concurrent guesses", () => {
  /** At most MAX guesses were checked (each answered `failure`); the right credential and all the others got 429. */
  function expectHeld(burst: BurstOutcome, failure: number): void {
    expect(burst.right).toBe(429);
    expect(burst.byStatus[failure]).toBe(MAX);
    expect(burst.byStatus[429]).toBe(300 - MAX);
  }

  it("of admin tokens: the admin token at position 150 answers 429", async () => {
    const attacker = client();
    const burst = await credentialBurst(async (token) => (await api.request("GET", "/admin/v1/organizations", { token, headers: attacker })).status, api.adminToken, (i) => `guess-${i}`);
    expectHeld(burst, 401);
  }, BURST_TIMEOUT_MS);

  it("of Inbound API keys: the world's key at position 150 answers 429", async () => {
    const key = await api.request("POST", `/admin/v1/worlds/${w.org}/${w.world}/api-keys`, { body: { name: "burst" } });
    const member = `/api/v1/worlds/${w.world}/members/c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b`;
    const attacker = client();
    const burst = await credentialBurst(async (token) => (await api.request("GET", member, { token, headers: attacker })).status, key.body.token, (i) => `vwk_guess${i}`);
    expectHeld(burst, 401);
  }, BURST_TIMEOUT_MS);

  it("of dashboard codes: a fresh code at position 150 answers 429 and still opens the dashboard for another client", async () => {
    const attacker = client();
    const fresh = codeOf((await mintLink(api, w.org, w.world)).body.url);
    const post = async (code: string) =>
      (await api.request("POST", "/dashboard/api/session", { token: null, body: { code }, headers: { origin: PUBLIC_ADMIN_URL, ...attacker } })).status;
    const burst = await credentialBurst(post, fresh, (i) => `guess${i}`.padEnd(43, "x"));
    expectHeld(burst, 401);
    // The code was never checked, so it was not used up.
    expect((await exchange(api, PUBLIC_ADMIN_URL, fresh)).status).toBe(200);
  }, BURST_TIMEOUT_MS);
});

describe("without a trusted proxy", () => {
  let direct: AdminApiHarness;
  beforeAll(async () => {
    direct = await startAdminApi({ authThrottle: { maxFailures: 2, windowMs: 60_000 } });
  });
  afterAll(async () => {
    await direct.close();
  });

  it("ignores X-Forwarded-For, so a client cannot reset its counter by inventing addresses", async () => {
    const statuses = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await direct.request("GET", "/admin/v1/organizations", { token: `guess-${i}`, headers: { "x-forwarded-for": `192.0.2.${i}` } })).status);
    expect(statuses).toEqual([401, 401, 429, 429]);
    // Behind a proxy that would lock every client out together: the operator is told, once.
    expect(direct.logs.filter((l) => l.level === "warn" && String(l.msg).includes("TRUST_PROXY is not set"))).toHaveLength(1);
  });
});
