import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { PUBLIC_ADMIN_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem, worldWithEndpoints } from "../test/endpoint-fixtures.js";
import { asSession, codeOf, cookiePair, exchange, mintLink, openSession } from "../test/dashboard-fixtures.js";

const ORIGIN = PUBLIC_ADMIN_URL;
/** The sessions' clock runs `offsetMs` ahead of the real one (moved forward to expire codes and sessions). */
let offsetMs = 0;
let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi({ now: () => new Date(Date.now() + offsetMs) });
});
afterEach(() => {
  offsetMs = 0;
});
afterAll(async () => {
  await api.close();
});

const sessionsPath = (org: string, world: string) => `/admin/v1/worlds/${org}/${world}/dashboard-sessions`;

describe("POST /admin/v1/worlds/{org}/{world}/dashboard-sessions (mint)", () => {
  it("answers a one-time link in the fragment of PUBLIC_ADMIN_URL/dashboard/, all capabilities and a 1 h session by default", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const before = Date.now();
    const res = await mintLink(api, org, world);
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body).toEqual({ url: expect.any(String), expiresAt: expect.any(String), capabilities: ["view", "manage-endpoints", "manage-api-keys", "send"] });
    expect(res.body.url).toMatch(new RegExp(`^${PUBLIC_ADMIN_URL}/dashboard/#code=[A-Za-z0-9_-]{43}$`));
    const ttl = Date.parse(res.body.expiresAt) - before;
    expect(ttl).toBeGreaterThanOrEqual(3_599_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000 + (Date.now() - before));
  });

  it("stores only a digest of the code", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const code = codeOf((await mintLink(api, org, world)).body.url);
    const rows = await api.prisma.$queryRaw<{ row: string }[]>`
      SELECT row_to_json(s)::text AS row FROM dashboard_sessions s JOIN worlds w ON w.id = s.world_id
      JOIN organizations o ON o.id = w.organization_id WHERE o.slug = ${org}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]?.row).not.toContain(code);
  });

  it("adds view to the capabilities asked for and keeps the canonical order", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const res = await mintLink(api, org, world, { capabilities: ["send", "manage-api-keys"] });
    expect(res.status).toBe(201);
    expect(res.body.capabilities).toEqual(["view", "manage-api-keys", "send"]);
    const opened = await exchange(api, ORIGIN, codeOf(res.body.url));
    expect(opened.body.capabilities).toEqual(["view", "manage-api-keys", "send"]);
  });

  it("takes ttlSeconds from 60 to 86400 and refuses anything else, naming the field", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const longest = await mintLink(api, org, world, { ttlSeconds: 86_400 });
    expect(longest.status).toBe(201);
    expect(Date.parse(longest.body.expiresAt) - Date.now()).toBeGreaterThan(86_390_000);
    expect((await mintLink(api, org, world, { ttlSeconds: 60 })).status).toBe(201);
    for (const ttlSeconds of [86_401, 59, 0, -1, 3600.5, "3600"]) {
      const res = await mintLink(api, org, world, { ttlSeconds });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors).toEqual([expect.objectContaining({ pointer: "/ttlSeconds" })]);
    }
  });

  it("refuses unknown, repeated or no capabilities and unknown members", async () => {
    const { org, world } = await worldWithEndpoints(api);
    for (const body of [{ capabilities: [] }, { capabilities: ["admin"] }, { capabilities: ["view", "view"] }, { capabilities: "view" }, { scope: "all" }]) {
      const res = await mintLink(api, org, world, body);
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors.length).toBeGreaterThan(0);
    }
  });

  it("needs the operator's token and an existing world", async () => {
    const { org, world } = await worldWithEndpoints(api);
    expectProblem(await api.request("POST", sessionsPath(org, world), { token: null }), 401);
    expectProblem(await api.request("POST", sessionsPath(org, world), { token: "wrong-token-wrong-token" }), 401);
    expectProblem(await mintLink(api, org, "nope"), 404);
    expectProblem(await api.request("PUT", sessionsPath(org, world)), 405);
  });
});

describe("POST /dashboard/api/session (the page's one-time exchange)", () => {
  it("opens the session once: body, HttpOnly Secure SameSite=Strict __Host- cookie until the session's end", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const minted = await mintLink(api, org, world, { ttlSeconds: 7200 });
    const res = await exchange(api, ORIGIN, codeOf(minted.body.url));
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body).toEqual({
      organization: org,
      world,
      worldName: "W",
      capabilities: ["view", "manage-endpoints", "manage-api-keys", "send"],
      expiresAt: minted.body.expiresAt,
    });
    const setCookie = res.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^__Host-vw-dashboard=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=(\d+); HttpOnly; SameSite=Strict; Secure$/);
    const maxAge = Number(/Max-Age=(\d+)/.exec(setCookie)?.[1]);
    expect(maxAge).toBeGreaterThan(7190);
    expect(maxAge).toBeLessThanOrEqual(7200);
    // The token is stored as a digest only.
    const token = cookiePair(setCookie).split("=")[1] ?? "";
    const rows = await api.prisma.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM dashboard_sessions WHERE row_to_json(dashboard_sessions)::text LIKE ${`%${token}%`}`;
    expect(Number(rows[0]?.n)).toBe(0);
  });

  it("refuses a used code (410), an unknown one (401) and an expired one (410), each saying which", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const code = codeOf((await mintLink(api, org, world)).body.url);
    expect((await exchange(api, ORIGIN, code)).status).toBe(200);
    const reused = await exchange(api, ORIGIN, code);
    expectProblem(reused, 410, "dashboard-link-used");
    expect(reused.body.detail).toMatch(/already been used/);
    expect(reused.headers.get("set-cookie")).toBeNull();

    const unknown = await exchange(api, ORIGIN, "x".repeat(43));
    expectProblem(unknown, 401, "dashboard-link-invalid");

    const late = codeOf((await mintLink(api, org, world)).body.url);
    const inTime = codeOf((await mintLink(api, org, world)).body.url);
    offsetMs = 10 * 60_000 + 1000;
    const expired = await exchange(api, ORIGIN, late);
    expectProblem(expired, 410, "dashboard-link-expired");
    expect(expired.body.detail).toMatch(/expired/);
    offsetMs = 9 * 60_000 + 50_000;
    expect((await exchange(api, ORIGIN, inTime)).status).toBe(200);
  });

  it("gives one session to two pages racing with the same code", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const code = codeOf((await mintLink(api, org, world)).body.url);
    const answers = await Promise.all(Array.from({ length: 5 }, () => exchange(api, ORIGIN, code)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 410, 410, 410, 410]);
  });

  it("refuses an exchange without the dashboard's Origin (login CSRF) and leaves the code usable", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const code = codeOf((await mintLink(api, org, world)).body.url);
    expectProblem(await api.request("POST", "/dashboard/api/session", { token: null, body: { code } }), 403, "cross-origin-request");
    expectProblem(await exchange(api, "https://evil.example.com", code), 403, "cross-origin-request");
    expect((await exchange(api, ORIGIN, code)).status).toBe(200);
  });

  it("refuses a malformed body with a problem", async () => {
    expectProblem(await api.request("POST", "/dashboard/api/session", { token: null, body: {}, headers: { origin: ORIGIN } }), 400, "invalid-request");
    expectProblem(await api.request("POST", "/dashboard/api/session", { token: null, body: { code: 7 }, headers: { origin: ORIGIN } }), 400);
    expectProblem(await api.request("POST", "/dashboard/api/session", { token: null, rawBody: "{", headers: { origin: ORIGIN, "content-type": "application/json" } }), 400);
  });
});

describe("GET and DELETE /dashboard/api/session", () => {
  it("describes the cookie's session; 401 without one or with a dead one", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const opened = await openSession(api, ORIGIN, org, world);
    const current = await asSession(api, opened, null)("GET", "/dashboard/api/session");
    expect(current.status).toBe(200);
    expect(current.body).toEqual(opened.session);
    expectProblem(await api.request("GET", "/dashboard/api/session", { token: null }), 401, "dashboard-session-required");
    const dead = await api.request("GET", "/dashboard/api/session", { token: null, headers: { cookie: "__Host-vw-dashboard=not-a-session" } });
    expectProblem(dead, 401, "dashboard-session-expired");
    expect(dead.headers.get("set-cookie")).toMatch(/^__Host-vw-dashboard=; Path=\/; Max-Age=0;/);
  });

  it("ends a session at its expiresAt", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const opened = await openSession(api, ORIGIN, org, world, { ttlSeconds: 60 });
    const call = asSession(api, opened, null);
    expect((await call("GET", `/admin/v1/worlds/${org}/${world}`)).status).toBe(200);
    offsetMs = 61_000;
    expectProblem(await call("GET", "/dashboard/api/session"), 401, "dashboard-session-expired");
    expectProblem(await call("GET", `/admin/v1/worlds/${org}/${world}`), 401, "dashboard-session-expired");
  });

  it("signs out (204, cookie cleared, the token dead at once); only from the dashboard's Origin", async () => {
    const { org, world } = await worldWithEndpoints(api);
    const opened = await openSession(api, ORIGIN, org, world);
    expectProblem(await asSession(api, opened, null)("DELETE", "/dashboard/api/session"), 403, "cross-origin-request");
    expectProblem(await asSession(api, opened, "https://evil.example.com")("DELETE", "/dashboard/api/session"), 403, "cross-origin-request");
    expect((await asSession(api, opened, null)("GET", "/dashboard/api/session")).status).toBe(200);
    const out = await asSession(api, opened, ORIGIN)("DELETE", "/dashboard/api/session");
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toBe("__Host-vw-dashboard=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure");
    expectProblem(await asSession(api, opened, null)("GET", `/admin/v1/worlds/${org}/${world}`), 401);
  });
});

describe("DELETE /admin/v1/worlds/{org}/{world}/dashboard-sessions (revoke)", () => {
  it("ends every session and unopened link of that world at once, and no other world's", async () => {
    const a = await worldWithEndpoints(api);
    const b = await worldWithEndpoints(api);
    const a1 = await openSession(api, ORIGIN, a.org, a.world);
    const a2 = await openSession(api, ORIGIN, a.org, a.world, { capabilities: ["view"] });
    const unopened = codeOf((await mintLink(api, a.org, a.world)).body.url);
    const b1 = await openSession(api, ORIGIN, b.org, b.world);

    const revoked = await api.request("DELETE", sessionsPath(a.org, a.world));
    expect(revoked.status).toBe(204);
    for (const opened of [a1, a2]) expectProblem(await asSession(api, opened, null)("GET", `/admin/v1/worlds/${a.org}/${a.world}`), 401, "dashboard-session-expired");
    expectProblem(await exchange(api, ORIGIN, unopened), 401, "dashboard-link-invalid");
    expect((await asSession(api, b1, null)("GET", `/admin/v1/worlds/${b.org}/${b.world}`)).status).toBe(200);
    // New links work again after a revocation.
    expect((await openSession(api, ORIGIN, a.org, a.world)).session.world).toBe(a.world);
    expectProblem(await api.request("DELETE", sessionsPath(a.org, "nope")), 404);
  });
});

describe("cookie policy", () => {
  it("is a plain SameSite=Strict cookie, not Secure, when PUBLIC_ADMIN_URL is http", async () => {
    const local = await startAdminApi({ publicAdminUrl: "http://localhost:3003" });
    try {
      const { org, world } = await worldWithEndpoints(local);
      const opened = await openSession(local, "http://localhost:3003", org, world);
      expect(opened.setCookie).toMatch(/^vw-dashboard=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict$/);
    } finally {
      await local.close();
    }
  });

  it("is SameSite=None; Secure; Partitioned over https when other sites may embed the dashboard", async () => {
    const embedded = await startAdminApi({ dashboardFrameAncestors: ["https://platform.example.com"] });
    try {
      const { org, world } = await worldWithEndpoints(embedded);
      const opened = await openSession(embedded, ORIGIN, org, world);
      expect(opened.setCookie).toMatch(/^__Host-vw-dashboard=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=None; Secure; Partitioned$/);
    } finally {
      await embedded.close();
    }
  });
});
