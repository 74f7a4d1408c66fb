import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createPrismaClient, generateApiKey, isRecordNotFound, pingDatabase, uniqueViolationFields, type PrismaClient } from "./index.js";

let prisma: PrismaClient;
const prefix = `dbt${randomBytes(3).toString("hex")}-`;

beforeAll(() => {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error("DATABASE_URL is not set: run through jest (test/global-setup.js)");
  prisma = createPrismaClient(url, { max: 2 });
});
afterAll(async () => {
  await prisma.organization.deleteMany({ where: { slug: { startsWith: prefix } } });
  await prisma.$disconnect();
});

const slug = (label: string) => `${prefix}${label}-${randomBytes(3).toString("hex")}`;

/** The error `op` rejects with (fails the test if it resolves). */
async function errorOf(op: Promise<unknown>): Promise<unknown> {
  try {
    await op;
  } catch (err) {
    return err;
  }
  throw new Error("expected the operation to fail");
}

describe("createPrismaClient / pingDatabase", () => {
  it("reaches the database", async () => {
    await expect(pingDatabase(prisma)).resolves.toBeUndefined();
  });

  it("reads catalog columns of type name and \"char\" (and their arrays) in raw queries", async () => {
    const rows = await prisma.$queryRaw<unknown[]>`
      SELECT 'n'::name AS n, 'c'::"char" AS c, ARRAY['a', 'b']::name[] AS names, ARRAY['x']::"char"[] AS chars`;
    expect(rows).toEqual([{ n: "n", c: "c", names: ["a", "b"], chars: ["x"] }]);
  });

  it("pingDatabase rejects when the database is unreachable", async () => {
    const dead = createPrismaClient("postgresql://postgres@127.0.0.1:1/none", { max: 1 });
    await expect(pingDatabase(dead)).rejects.toThrow();
    await dead.$disconnect();
  });
});

describe("schema", () => {
  it("gives new worlds the documented settings defaults", async () => {
    const org = await prisma.organization.create({
      data: { slug: slug("o"), name: "O", worlds: { create: { slug: "w", name: "W", adminEmails: ["a@example.com"] } } },
      include: { worlds: true },
    });
    const world = org.worlds[0]!;
    expect(world.analytics).toEqual({
      enabled: true,
      userLevelActivity: true,
      categories: { presenceAndSessions: true, collaboration: true, workspaceActions: true, qualityDiagnostics: true },
    });
    expect(world.identityProviders).toEqual([]);
    expect(world.customDomain).toBeNull();
    expect(world.createdAt).toBeInstanceOf(Date);
  });

  it("uses snake_case tables and columns", async () => {
    const rows = await prisma.$queryRaw<{ table_name: string; column_name: string }[]>`
      SELECT table_name, column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name IN ('organizations', 'worlds', 'api_keys')`;
    const columns = rows.map((r) => `${r.table_name}.${r.column_name}`);
    expect(columns).toEqual(expect.arrayContaining(["worlds.organization_id", "worlds.admin_emails", "worlds.custom_domain", "api_keys.token_hash", "api_keys.revoked_at"]));
    expect(columns.every((c) => c === c.toLowerCase())).toBe(true);
  });

  it("deletes an organization's worlds and API keys with it", async () => {
    const key = generateApiKey();
    const org = await prisma.organization.create({
      data: {
        slug: slug("cascade"),
        name: "C",
        worlds: { create: { slug: "w", name: "W", adminEmails: [], apiKeys: { create: { tokenHash: key.tokenHash, tokenPrefix: key.tokenPrefix } } } },
      },
    });
    await prisma.organization.delete({ where: { id: org.id } });
    expect(await prisma.world.count({ where: { organizationId: org.id } })).toBe(0);
    expect(await prisma.apiKey.count({ where: { tokenHash: key.tokenHash } })).toBe(0);
  });
});

describe("uniqueViolationFields / isRecordNotFound", () => {
  it("names the columns of the violated unique constraint", async () => {
    const orgSlug = slug("u");
    const domain = `${orgSlug}.example.test`;
    const org = await prisma.organization.create({ data: { slug: orgSlug, name: "U" } });
    await prisma.world.create({ data: { organizationId: org.id, slug: "w", name: "W", adminEmails: [], customDomain: domain } });

    expect(uniqueViolationFields(await errorOf(prisma.organization.create({ data: { slug: orgSlug, name: "again" } })))).toEqual(["slug"]);
    expect(
      uniqueViolationFields(await errorOf(prisma.world.create({ data: { organizationId: org.id, slug: "w", name: "W", adminEmails: [] } }))),
    ).toEqual(["organization_id", "slug"]);
    expect(
      uniqueViolationFields(
        await errorOf(prisma.world.create({ data: { organizationId: org.id, slug: "w2", name: "W", adminEmails: [], customDomain: domain } })),
      ),
    ).toEqual(["custom_domain"]);
  });

  it("is undefined for other errors; isRecordNotFound spots P2025", async () => {
    const missing = await errorOf(prisma.organization.update({ where: { slug: slug("none") }, data: { name: "x" } }));
    expect(uniqueViolationFields(missing)).toBeUndefined();
    expect(isRecordNotFound(missing)).toBe(true);
    expect(uniqueViolationFields(new Error("P2002"))).toBeUndefined();
    expect(isRecordNotFound(new Error("P2025"))).toBe(false);
  });
});
