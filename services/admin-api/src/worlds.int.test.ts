import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { WorldStorageLedger } from "@vw/db";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { PLAY_URL, PUBLIC_MAP_STORAGE_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi();
});
afterAll(async () => {
  await api.close();
});

const ALL_ON = {
  enabled: true,
  userLevelActivity: true,
  categories: { presenceAndSessions: true, collaboration: true, workspaceActions: true, qualityDiagnostics: true },
};

async function createOrganization(): Promise<string> {
  const slug = api.slug("org");
  const res = await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "Org" } });
  expect(res.status).toBe(201);
  return slug;
}

/** A unique lower-case host name for this run. */
const domain = () => `${api.slug("d")}.example.test`;

async function createWorld(org: string, extra: Record<string, unknown> = {}) {
  const slug = api.slug("w");
  const res = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, {
    body: { slug, name: "World", adminEmails: ["owner@example.com"], ...extra },
  });
  expect(res.status).toBe(201);
  return res.body as { slug: string; [k: string]: any };
}

describe("POST /admin/v1/organizations/{org}/worlds", () => {
  it("creates a world with default settings: 201, Location, full representation", async () => {
    const org = await createOrganization();
    const res = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, {
      body: { slug: "office", name: "The Office", adminEmails: ["a@example.com", "b@example.org"] },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe(`/admin/v1/worlds/${org}/office`);
    expect(res.body).toEqual({
      id: expect.any(String),
      organization: org,
      slug: "office",
      name: "The Office",
      adminEmails: ["a@example.com", "b@example.org"],
      customDomain: null,
      mapStorageUrl: `${PUBLIC_MAP_STORAGE_URL}/${org}/office`,
      playUrl: `${PLAY_URL}/@/${org}/office`,
      roomUrlBase: `${PLAY_URL}/@/${org}/office/`,
      analytics: ALL_ON,
      identityProviders: [],
      quotas: { maxEndpoints: null, maxAuthEndpoints: null, analyticsBufferMax: null, maxStorageBytes: null },
      // A new world stores nothing yet; its quota is the platform's.
      storage: { bytesInUse: 0, maxBytes: 10 * 1024 ** 3 },
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
  });

  it("takes a custom domain, analytics and identity providers at creation", async () => {
    const org = await createOrganization();
    const customDomain = domain();
    const world = await createWorld(org, {
      customDomain,
      analytics: { userLevelActivity: false },
      identityProviders: [{ id: "okta", kind: "openid-connect", exposeAccessToken: true }, { id: "google", kind: "google" }],
    });
    expect(world.customDomain).toBe(customDomain);
    expect(world.playUrl).toBe(`https://${customDomain}/`);
    expect(world.roomUrlBase).toBe(`https://${customDomain}/@/`);
    expect(world.analytics).toEqual({ ...ALL_ON, userLevelActivity: false });
    expect(world.identityProviders).toEqual([
      { id: "okta", kind: "openid-connect", exposeAccessToken: true },
      { id: "google", kind: "google", exposeAccessToken: false },
    ]);
  });

  it("answers 404 for an unknown organization", async () => {
    const res = await api.request("POST", `/admin/v1/organizations/${api.slug("ghost")}/worlds`, {
      body: { slug: "office", name: "W", adminEmails: ["a@example.com"] },
    });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  });

  it("answers 409 for a slug taken in the organization, and allows it in another one", async () => {
    const org = await createOrganization();
    const other = await createOrganization();
    const body = { slug: "same", name: "W", adminEmails: ["a@example.com"] };
    expect((await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body })).status).toBe(201);
    const dup = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body });
    expect(dup.status).toBe(409);
    expect(dup.body).toMatchObject({ type: "/problems/world-exists", errors: [{ pointer: "/slug", detail: expect.any(String) }] });
    expect((await api.request("POST", `/admin/v1/organizations/${other}/worlds`, { body })).status).toBe(201);
  });

  it("answers 409 for a custom domain used by a world of any organization", async () => {
    const customDomain = domain();
    await createWorld(await createOrganization(), { customDomain });
    const res = await api.request("POST", `/admin/v1/organizations/${await createOrganization()}/worlds`, {
      body: { slug: "copy", name: "W", adminEmails: ["a@example.com"], customDomain },
    });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ type: "/problems/custom-domain-taken", errors: [{ pointer: "/customDomain", detail: expect.any(String) }] });
  });

  it("accepts a one-character slug", async () => {
    const org = await createOrganization();
    const res = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug: "7", name: "W", adminEmails: ["a@example.com"] } });
    expect(res.status).toBe(201);
  });

  it("points at each invalid member", async () => {
    const org = await createOrganization();
    const res = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, {
      body: { slug: "ok", name: "W", adminEmails: ["fine@example.com", "not-an-email"], customDomain: "https://x.example.com/", colour: "red" },
    });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual(
      expect.arrayContaining([
        { pointer: "/colour", detail: "is not allowed" },
        { pointer: "/adminEmails/1", detail: "must be a valid email" },
        { pointer: "/customDomain", detail: expect.stringContaining("host name") },
      ]),
    );
    expect(res.body.errors).toHaveLength(3);
  });

  it("requires at least one admin e-mail", async () => {
    const org = await createOrganization();
    const missing = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug: "a", name: "W" } });
    expect(missing.body.errors).toEqual([{ pointer: "/adminEmails", detail: "is required" }]);
    const empty = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug: "a", name: "W", adminEmails: [] } });
    expect(empty.status).toBe(400);
    expect(empty.body.errors).toEqual([{ pointer: "/adminEmails", detail: "must have at least 1 items" }]);
  });

  it.each(["Play.Example.com", "example", "play.example.com:8443", "play.example.com/path", "10.0.0.1", "-x.example.com", "play.example.com."])(
    "refuses the custom domain %p",
    async (customDomain) => {
      const org = await createOrganization();
      const res = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, {
        body: { slug: "a", name: "W", adminEmails: ["a@example.com"], customDomain },
      });
      expect(res.status).toBe(400);
      expect(res.body.errors).toEqual([{ pointer: "/customDomain", detail: expect.any(String) }]);
    },
  );
});

describe("GET /admin/v1/organizations/{org}/worlds", () => {
  it("lists the organization's worlds by slug with cursor pagination", async () => {
    const org = await createOrganization();
    for (const slug of ["c", "a", "b"]) {
      expect((await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug, name: slug, adminEmails: ["a@example.com"] } })).status).toBe(201);
    }
    await createWorld(await createOrganization()); // another organization's world is not listed
    const first = await api.request("GET", `/admin/v1/organizations/${org}/worlds?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.items.map((w: { slug: string }) => w.slug)).toEqual(["a", "b"]);
    expect(first.body.items[0].mapStorageUrl).toBe(`${PUBLIC_MAP_STORAGE_URL}/${org}/a`);
    expect(first.body.nextCursor).toMatch(/^[A-Za-z0-9_-]+$/); // opaque, URL-safe
    const second = await api.request("GET", `/admin/v1/organizations/${org}/worlds?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body).toEqual({ items: [expect.objectContaining({ slug: "c" })], nextCursor: null });
    const all = await api.request("GET", `/admin/v1/organizations/${org}/worlds`);
    expect(all.body.items).toHaveLength(3);
    expect(all.body.nextCursor).toBeNull();
  });

  it("keeps paging when the world that ended the previous page is deleted meanwhile", async () => {
    const org = await createOrganization();
    for (const slug of ["a", "b", "c", "d", "e"]) {
      expect((await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug, name: slug, adminEmails: ["a@example.com"] } })).status).toBe(201);
    }
    const first = await api.request("GET", `/admin/v1/organizations/${org}/worlds?limit=2`);
    expect(first.body.items.map((w: { slug: string }) => w.slug)).toEqual(["a", "b"]);
    await api.prisma.world.delete({ where: { id: first.body.items[1].id } });
    const second = await api.request("GET", `/admin/v1/organizations/${org}/worlds?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.items.map((w: { slug: string }) => w.slug)).toEqual(["c", "d"]);
    expect(second.body.nextCursor).not.toBeNull();
    // A cursor of a list ordered otherwise (newest first) is refused, not misread.
    const endpointsCursor = Buffer.from(JSON.stringify(["t", new Date().toISOString(), first.body.items[0].id])).toString("base64url");
    expectProblem(await api.request("GET", `/admin/v1/organizations/${org}/worlds?cursor=${endpointsCursor}`), 400, "invalid-parameter");
    // A forged cursor carrying what no slug holds (a NUL) is a 400 too, never a query.
    const forged = Buffer.from(JSON.stringify(["s", "a\u0000", first.body.items[0].id])).toString("base64url");
    expectProblem(await api.request("GET", `/admin/v1/organizations/${org}/worlds?cursor=${forged}`), 400, "invalid-parameter");
  });

  it("answers 404 for an unknown organization", async () => {
    expect((await api.request("GET", `/admin/v1/organizations/${api.slug("ghost")}/worlds`)).status).toBe(404);
  });
});

describe("GET /admin/v1/worlds/{org}/{world}", () => {
  it("returns the world", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    const res = await api.request("GET", `/admin/v1/worlds/${org}/${world.slug}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(world);
  });

  it("shows the bytes map-storage counted for the world's files, and its storage quota (the operator's, else the platform's)", async () => {
    const org = await createOrganization();
    const world = await createWorld(org, { quotas: { maxStorageBytes: 5 * 1024 ** 3 } });
    // As map-storage counts a world's writes (the count started at 0 with the world).
    const ledger = new WorldStorageLedger(api.prisma);
    expect(await ledger.adjust({ organization: org, world: world.slug }, 3 * 1024 ** 3)).toBe(true);
    expect(await ledger.adjust({ organization: org, world: world.slug }, 1234)).toBe(true);
    const res = await api.request("GET", `/admin/v1/worlds/${org}/${world.slug}`);
    expect(res.body.storage).toEqual({ bytesInUse: 3 * 1024 ** 3 + 1234, maxBytes: 5 * 1024 ** 3 });
    const listed = await api.request("GET", `/admin/v1/organizations/${org}/worlds`);
    expect(listed.body.items.map((w: { storage: unknown }) => w.storage)).toEqual([{ bytesInUse: 3 * 1024 ** 3 + 1234, maxBytes: 5 * 1024 ** 3 }]);
  });

  it("answers 404 for an unknown world or organization, and for a world of another organization", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    expect((await api.request("GET", `/admin/v1/worlds/${org}/nope`)).status).toBe(404);
    expect((await api.request("GET", `/admin/v1/worlds/${api.slug("ghost")}/${world.slug}`)).status).toBe(404);
    expect((await api.request("GET", `/admin/v1/worlds/${await createOrganization()}/${world.slug}`)).status).toBe(404);
  });
});

describe("PATCH /admin/v1/worlds/{org}/{world}", () => {
  it("changes name and admin e-mails, keeping everything else", async () => {
    const org = await createOrganization();
    const world = await createWorld(org, { customDomain: domain() });
    const res = await api.request("PATCH", `/admin/v1/worlds/${org}/${world.slug}`, { body: { name: "Renamed", adminEmails: ["new@example.com"] } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...world, name: "Renamed", adminEmails: ["new@example.com"], updatedAt: expect.any(String) });
    expect(Date.parse(res.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(world.updatedAt));
    expect((await api.request("GET", `/admin/v1/worlds/${org}/${world.slug}`)).body).toEqual(res.body);
  });

  it("accepts application/merge-patch+json", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    const res = await api.request("PATCH", `/admin/v1/worlds/${org}/${world.slug}`, {
      body: { name: "Merged" },
      headers: { "content-type": "application/merge-patch+json" },
    });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe("Merged");
  });

  it("sets the custom domain and clears it with null", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    const path = `/admin/v1/worlds/${org}/${world.slug}`;
    const first = domain();
    expect((await api.request("PATCH", path, { body: { customDomain: first } })).body.customDomain).toBe(first);
    const cleared = await api.request("PATCH", path, { body: { customDomain: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.customDomain).toBeNull();
    expect(cleared.body.playUrl).toBe(`${PLAY_URL}/@/${org}/${world.slug}`);
    expect(cleared.body.roomUrlBase).toBe(`${PLAY_URL}/@/${org}/${world.slug}/`);
    const row = await api.prisma.world.findUniqueOrThrow({ where: { id: world.id } });
    expect(row.customDomain).toBeNull();
    // A cleared domain is free for another world.
    expect((await createWorld(org, { customDomain: first })).customDomain).toBe(first);
  });

  it("answers 409 when the custom domain belongs to another world, and changes nothing", async () => {
    const org = await createOrganization();
    const taken = domain();
    await createWorld(org, { customDomain: taken });
    const world = await createWorld(org);
    const res = await api.request("PATCH", `/admin/v1/worlds/${org}/${world.slug}`, { body: { name: "Changed", customDomain: taken } });
    expect(res.status).toBe(409);
    expect(res.body.errors).toEqual([{ pointer: "/customDomain", detail: expect.any(String) }]);
    expect((await api.request("GET", `/admin/v1/worlds/${org}/${world.slug}`)).body).toEqual(world);
  });

  it("deep-merges analytics: members not sent keep their values", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    const path = `/admin/v1/worlds/${org}/${world.slug}`;
    const first = await api.request("PATCH", path, { body: { analytics: { categories: { collaboration: false } } } });
    expect(first.status).toBe(200);
    expect(first.body.analytics).toEqual({ ...ALL_ON, categories: { ...ALL_ON.categories, collaboration: false } });
    const second = await api.request("PATCH", path, { body: { analytics: { userLevelActivity: false, categories: { qualityDiagnostics: false } } } });
    expect(second.body.analytics).toEqual({
      enabled: true,
      userLevelActivity: false,
      categories: { presenceAndSessions: true, collaboration: false, workspaceActions: true, qualityDiagnostics: false },
    });
    const third = await api.request("PATCH", path, { body: { analytics: { enabled: false, categories: { collaboration: true } } } });
    expect(third.body.analytics).toEqual({
      enabled: false,
      userLevelActivity: false,
      categories: { presenceAndSessions: true, collaboration: true, workspaceActions: true, qualityDiagnostics: false },
    });
    const row = await api.prisma.world.findUniqueOrThrow({ where: { id: world.id } });
    expect(row.analytics).toEqual(third.body.analytics);
  });

  it("loses no switch when patches of different analytics members run concurrently", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    const path = `/admin/v1/worlds/${org}/${world.slug}`;
    const categories = ["presenceAndSessions", "collaboration", "workspaceActions", "qualityDiagnostics"];
    const results = await Promise.all(
      categories.map((c) => api.request("PATCH", path, { body: { analytics: { categories: { [c]: false } } } })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const res = await api.request("GET", path);
    expect(res.body.analytics.categories).toEqual({ presenceAndSessions: false, collaboration: false, workspaceActions: false, qualityDiagnostics: false });
  });

  it("replaces the identity providers", async () => {
    const org = await createOrganization();
    const world = await createWorld(org, { identityProviders: [{ id: "gh", kind: "github" }] });
    const path = `/admin/v1/worlds/${org}/${world.slug}`;
    const replaced = await api.request("PATCH", path, {
      body: { identityProviders: [{ id: "corp", kind: "openid-connect", exposeAccessToken: true }, { id: "ms", kind: "microsoft" }] },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.identityProviders).toEqual([
      { id: "corp", kind: "openid-connect", exposeAccessToken: true },
      { id: "ms", kind: "microsoft", exposeAccessToken: false },
    ]);
    const emptied = await api.request("PATCH", path, { body: { identityProviders: [] } });
    expect(emptied.body.identityProviders).toEqual([]);
  });

  it("refuses duplicate identity-provider ids, unknown kinds and missing members, with pointers", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    const path = `/admin/v1/worlds/${org}/${world.slug}`;
    const dup = await api.request("PATCH", path, { body: { identityProviders: [{ id: "a", kind: "google" }, { id: "b", kind: "github" }, { id: "a", kind: "discord" }] } });
    expect(dup.status).toBe(400);
    expect(dup.body.errors).toEqual([{ pointer: "/identityProviders/2/id", detail: expect.stringContaining("/identityProviders/0/id") }]);
    const bad = await api.request("PATCH", path, { body: { identityProviders: [{ id: "x", kind: "myspace" }, { kind: "google", exposeAccessToken: "yes" }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual(
      expect.arrayContaining([
        { pointer: "/identityProviders/0/kind", detail: expect.stringContaining("openid-connect") },
        { pointer: "/identityProviders/1/id", detail: "is required" },
        { pointer: "/identityProviders/1/exposeAccessToken", detail: "must be boolean" },
      ]),
    );
    expect((await api.request("GET", path)).body.identityProviders).toEqual([]);
  });

  it("refuses members that cannot change or do not exist, and invalid values", async () => {
    const org = await createOrganization();
    const world = await createWorld(org);
    const path = `/admin/v1/worlds/${org}/${world.slug}`;
    const res = await api.request("PATCH", path, {
      body: { slug: "renamed", analytics: { enabled: "yes", categories: { marketing: true } }, adminEmails: [], customDomain: 42 },
    });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual(
      expect.arrayContaining([
        { pointer: "/slug", detail: "is not allowed" },
        { pointer: "/analytics/enabled", detail: "must be boolean" },
        { pointer: "/analytics/categories/marketing", detail: "is not allowed" },
        { pointer: "/adminEmails", detail: expect.any(String) },
        { pointer: "/customDomain", detail: expect.any(String) },
      ]),
    );
    expect((await api.request("GET", path)).body).toEqual(world);
  });

  it("answers 404 for an unknown world and 415 for a non-JSON body", async () => {
    const org = await createOrganization();
    expect((await api.request("PATCH", `/admin/v1/worlds/${org}/nope`, { body: { name: "x" } })).status).toBe(404);
    const world = await createWorld(org);
    const res = await api.request("PATCH", `/admin/v1/worlds/${org}/${world.slug}`, { rawBody: "name=x", headers: { "content-type": "text/plain" } });
    expect(res.status).toBe(415);
  });
});
