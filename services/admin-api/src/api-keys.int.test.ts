import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { PUBLIC_MAP_STORAGE_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi();
});
afterAll(async () => {
  await api.close();
});

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** An organization with one world; returns the admin path of the world's keys. */
async function worldKeysPath(): Promise<{ org: string; world: string; keys: string }> {
  const org = api.slug("org");
  expect((await api.request("POST", "/admin/v1/organizations", { body: { slug: org, name: "Org" } })).status).toBe(201);
  const world = "main";
  expect((await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug: world, name: "W", adminEmails: ["a@example.com"] } })).status).toBe(201);
  return { org, world, keys: `/admin/v1/worlds/${org}/${world}/api-keys` };
}

describe("POST /admin/v1/worlds/{org}/{world}/api-keys", () => {
  it("issues a key: 201, token shown once with the world's map-storage address, no-store", async () => {
    const { org, world, keys } = await worldKeysPath();
    const res = await api.request("POST", keys, { body: { name: "CI deploys" } });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("location")).toBe(`${keys}/${res.body.id}`);
    expect(res.body).toEqual({
      id: expect.any(String),
      name: "CI deploys",
      token: expect.stringMatching(/^vwk_[A-Za-z0-9_-]{43}$/),
      tokenPrefix: expect.any(String),
      mapStorageUrl: `${PUBLIC_MAP_STORAGE_URL}/${org}/${world}`,
      createdAt: expect.any(String),
    });
    expect(res.body.tokenPrefix).toBe(res.body.token.slice(0, 12));
  });

  it("stores only the SHA-256 of the token: no column of the row holds the token", async () => {
    const { keys } = await worldKeysPath();
    const { body } = await api.request("POST", keys, {});
    const row = await api.prisma.apiKey.findUniqueOrThrow({ where: { id: body.id } });
    expect(row.tokenHash).toBe(sha256(body.token));
    expect(row.tokenPrefix).toBe(body.token.slice(0, 12));
    // Read the raw row, every column, as the database holds it.
    const [raw] = await api.prisma.$queryRaw<{ row: string }[]>`SELECT row_to_json(k)::text AS row FROM api_keys k WHERE id = ${body.id}::uuid`;
    expect(raw?.row).toContain(sha256(body.token));
    expect(raw?.row).not.toContain(body.token);
    expect(raw?.row).not.toContain(body.token.slice(4));
  });

  it("issues a different token every time", async () => {
    const { keys } = await worldKeysPath();
    const tokens = await Promise.all([1, 2, 3].map(async () => (await api.request("POST", keys, { body: {} })).body.token));
    expect(new Set(tokens).size).toBe(3);
  });

  it("accepts no body at all and a null name", async () => {
    const { keys } = await worldKeysPath();
    const bare = await api.request("POST", keys);
    expect(bare.status).toBe(201);
    expect(bare.body.name).toBeNull();
    const nullName = await api.request("POST", keys, { body: { name: null } });
    expect(nullName.status).toBe(201);
    expect(nullName.body.name).toBeNull();
  });

  it("refuses an invalid body with pointers", async () => {
    const { keys } = await worldKeysPath();
    const res = await api.request("POST", keys, { body: { name: 7, scope: "all" } });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual(
      expect.arrayContaining([
        { pointer: "/name", detail: "must be string or null" },
        { pointer: "/scope", detail: "is not allowed" },
      ]),
    );
    expect(await api.request("GET", keys).then((r) => r.body.items)).toEqual([]);
  });

  it("answers 404 for an unknown world or organization", async () => {
    const { org } = await worldKeysPath();
    expect((await api.request("POST", `/admin/v1/worlds/${org}/nope/api-keys`, { body: {} })).status).toBe(404);
    expect((await api.request("POST", `/admin/v1/worlds/${api.slug("ghost")}/main/api-keys`, { body: {} })).status).toBe(404);
  });
});

describe("GET /admin/v1/worlds/{org}/{world}/api-keys", () => {
  it("lists the world's keys newest first, never with the token or its hash", async () => {
    const { keys } = await worldKeysPath();
    const created = [];
    for (const name of ["first", "second", "third"]) created.push((await api.request("POST", keys, { body: { name } })).body);
    await worldKeysPath().then(({ keys: other }) => api.request("POST", other, { body: { name: "elsewhere" } }));

    const res = await api.request("GET", keys);
    expect(res.status).toBe(200);
    expect(res.body.nextCursor).toBeNull();
    expect(res.body.items.map((k: { name: string }) => k.name)).toEqual(["third", "second", "first"]);
    for (const item of res.body.items) {
      expect(Object.keys(item).sort()).toEqual(["createdAt", "id", "lastUsedAt", "name", "revokedAt", "tokenPrefix"]);
      expect(item).toMatchObject({ revokedAt: null, lastUsedAt: null });
    }
    for (const key of created) {
      expect(res.text).not.toContain(key.token);
      expect(res.text).not.toContain(sha256(key.token));
    }
  });

  it("pages with a cursor", async () => {
    const { keys } = await worldKeysPath();
    for (const name of ["k1", "k2", "k3"]) await api.request("POST", keys, { body: { name } });
    const first = await api.request("GET", `${keys}?limit=2`);
    expect(first.body.items.map((k: { name: string }) => k.name)).toEqual(["k3", "k2"]);
    const second = await api.request("GET", `${keys}?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.items.map((k: { name: string }) => k.name)).toEqual(["k1"]);
    expect(second.body.nextCursor).toBeNull();
  });

  it("GET one key shows it without the token; a key of another world is 404", async () => {
    const { keys } = await worldKeysPath();
    const { keys: otherKeys } = await worldKeysPath();
    const key = (await api.request("POST", keys, { body: { name: "one" } })).body;
    const res = await api.request("GET", `${keys}/${key.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: key.id, name: "one", tokenPrefix: key.tokenPrefix, createdAt: key.createdAt, revokedAt: null, lastUsedAt: null });
    expect((await api.request("GET", `${otherKeys}/${key.id}`)).status).toBe(404);
  });
});

describe("DELETE /admin/v1/worlds/{org}/{world}/api-keys/{id}", () => {
  it("revokes at once: 204, revokedAt set in the database and in the list", async () => {
    const { keys } = await worldKeysPath();
    const key = (await api.request("POST", keys, { body: { name: "to revoke" } })).body;
    const keep = (await api.request("POST", keys, { body: { name: "to keep" } })).body;
    const before = Date.now();
    const res = await api.request("DELETE", `${keys}/${key.id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    const row = await api.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } });
    expect(row.revokedAt).toBeInstanceOf(Date);
    expect(row.revokedAt!.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect((await api.prisma.apiKey.findUniqueOrThrow({ where: { id: keep.id } })).revokedAt).toBeNull();
    const listed = (await api.request("GET", keys)).body.items;
    expect(listed.find((k: { id: string }) => k.id === key.id).revokedAt).toBe(row.revokedAt!.toISOString());
    expect(listed.find((k: { id: string }) => k.id === keep.id).revokedAt).toBeNull();
  });

  it("is idempotent: revoking again is 204 and keeps the first revokedAt", async () => {
    const { keys } = await worldKeysPath();
    const key = (await api.request("POST", keys, {})).body;
    expect((await api.request("DELETE", `${keys}/${key.id}`)).status).toBe(204);
    const first = (await api.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).revokedAt;
    expect(first).not.toBeNull();
    expect((await api.request("DELETE", `${keys}/${key.id}`)).status).toBe(204);
    expect((await api.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).revokedAt).toEqual(first);
  });

  it("answers 404 for an unknown id, a malformed id and a key of another world (which stays active)", async () => {
    const { keys } = await worldKeysPath();
    const { keys: otherKeys } = await worldKeysPath();
    const foreign = (await api.request("POST", otherKeys, {})).body;
    for (const id of ["3f1c9a5e-8a0b-4c55-9c61-5d2b8f0e7a11", "not-a-uuid", "1"]) {
      const res = await api.request("DELETE", `${keys}/${id}`);
      expect(res.status).toBe(404);
      expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    }
    expect((await api.request("DELETE", `${keys}/${foreign.id}`)).status).toBe(404);
    expect((await api.prisma.apiKey.findUniqueOrThrow({ where: { id: foreign.id } })).revokedAt).toBeNull();
  });
});
