import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { RESERVED_ORGANIZATION_SLUGS } from "@vw/contracts";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi();
});
afterAll(async () => {
  await api.close();
});

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe("POST /admin/v1/organizations", () => {
  it("creates an organization: 201, Location, representation", async () => {
    const slug = api.slug("acme");
    const res = await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "Acme Corp" } });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe(`/admin/v1/organizations/${slug}`);
    expect(res.body).toEqual({ id: expect.any(String), slug, name: "Acme Corp", createdAt: expect.stringMatching(ISO), updatedAt: expect.stringMatching(ISO) });
    const row = await api.prisma.organization.findUnique({ where: { slug } });
    expect(row?.id).toBe(res.body.id);
  });

  it("answers 409 for a slug already taken, pointing at /slug", async () => {
    const slug = api.slug("dup");
    expect((await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "First" } })).status).toBe(201);
    const res = await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "Second" } });
    expect(res.status).toBe(409);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ type: "/problems/organization-exists", errors: [{ pointer: "/slug", detail: "is already taken" }] });
    const rows = await api.prisma.organization.findMany({ where: { slug } });
    expect(rows.map((r) => r.name)).toEqual(["First"]);
  });

  it("answers one 201 and one 409 (never a 500) for two concurrent creations of one slug", async () => {
    const slug = api.slug("race");
    const statuses = await Promise.all([1, 2].map((n) => api.request("POST", "/admin/v1/organizations", { body: { slug, name: `Racer ${n}` } })));
    expect(statuses.map((r) => r.status).sort()).toEqual([201, 409]);
  });

  it("points at missing members, extra members and invalid values, all at once", async () => {
    const missing = await api.request("POST", "/admin/v1/organizations", { body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.type).toBe("/problems/invalid-request");
    expect(missing.body.errors).toEqual([
      { pointer: "/slug", detail: "is required" },
      { pointer: "/name", detail: "is required" },
    ]);

    const extra = await api.request("POST", "/admin/v1/organizations", { body: { slug: api.slug(), name: "X", plan: "gold" } });
    expect(extra.status).toBe(400);
    expect(extra.body.errors).toEqual([{ pointer: "/plan", detail: "is not allowed" }]);

    const invalid = await api.request("POST", "/admin/v1/organizations", { body: { slug: "Has Spaces", name: "   " } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.errors).toEqual([
      { pointer: "/slug", detail: expect.stringContaining("lower-case letters, digits or hyphens") },
      { pointer: "/name", detail: "must not be blank" },
    ]);
  });

  it.each(["-leading", "trailing-", "UPPER", "a_b", "x".repeat(64), "", "a.b"])("refuses the slug %p", async (slug) => {
    const res = await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "X" } });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([{ pointer: "/slug", detail: expect.any(String) }]);
  });

  it("accepts a slug of 63 characters", async () => {
    const long = api.slug("l").padEnd(63, "x");
    expect(long).toHaveLength(63);
    expect((await api.request("POST", "/admin/v1/organizations", { body: { slug: long, name: "Long" } })).status).toBe(201);
  });

  it.each([...RESERVED_ORGANIZATION_SLUGS])("refuses the reserved slug %p with a pointer at /slug", async (slug) => {
    const res = await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "Reserved" } });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([{ pointer: "/slug", detail: expect.any(String) }]);
    expect(await api.prisma.organization.count({ where: { slug } })).toBe(0);
  });
});

describe("GET /admin/v1/organizations/{org}", () => {
  it("returns the organization", async () => {
    const slug = api.slug("get");
    const created = await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "Gettable" } });
    const res = await api.request("GET", `/admin/v1/organizations/${slug}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created.body);
  });

  it("answers 404 for an unknown organization", async () => {
    const res = await api.request("GET", `/admin/v1/organizations/${api.slug("missing")}`);
    expect(res.status).toBe(404);
    expect(res.body.type).toBe("/problems/not-found");
  });
});

describe("GET /admin/v1/organizations", () => {
  it("lists organizations by slug, a page at a time", async () => {
    const prefix = api.slug("page");
    const slugs = ["c", "a", "d", "b", "e"].map((s) => `${prefix}-${s}`);
    for (const slug of slugs) {
      expect((await api.request("POST", "/admin/v1/organizations", { body: { slug, name: slug } })).status).toBe(201);
    }
    // Walk every page of the whole list (other test files add rows too) and keep ours.
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await api.request("GET", `/admin/v1/organizations?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(res.status).toBe(200);
      expect(res.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.items.map((o: { slug: string }) => o.slug));
      cursor = res.body.nextCursor;
      pages += 1;
    } while (cursor !== null && pages < 10_000);
    expect(seen.filter((s) => s.startsWith(prefix))).toEqual([...slugs].sort());
    expect(new Set(seen).size).toBe(seen.length);
  });
});
