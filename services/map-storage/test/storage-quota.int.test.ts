/**
 * The storage quota of a world (MAX_STORAGE_BYTES_PER_WORLD, or the operator's
 * `quotas.maxStorageBytes`), against the real PostgreSQL, Redis and S3: PUT, PATCH and upload are
 * refused past it with 413 `quota-exceeded` naming the limit and the bytes in use, and nothing is
 * stored; replacing a file or a directory counts what it replaces; concurrent writes never pass
 * the limit together; a world stored before the count existed is counted first.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { WorldStorageLedger, type PrismaClient } from "@vw/db";
import { createTestWorld, rand, sampleWam, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";
import { makeZip } from "./zip-fixtures.js";

let prisma: PrismaClient;
let ledger: WorldStorageLedger;
let ms: RunningMapStorage;

beforeAll(async () => {
  prisma = testPrisma();
  ledger = new WorldStorageLedger(prisma);
  // The platform default, for worlds without their own.
  ms = await startMapStorage({ MAX_STORAGE_BYTES_PER_WORLD: "50000" });
});
afterAll(async () => {
  await ms.close();
  await prisma.$disconnect();
});

/** A world whose operator set `quotas.maxStorageBytes` (null: the platform default). */
async function worldWithQuota(maxStorageBytes: number | null): Promise<TestWorld> {
  const t = await createTestWorld(prisma);
  if (maxStorageBytes !== null) await prisma.world.update({ where: { id: t.worldId }, data: { maxStorageBytes: BigInt(maxStorageBytes) } });
  return t;
}

const url = (t: TestWorld, path: string) => `${ms.baseUrl}/${t.org}/${t.world}/${path}`;
const auth = (t: TestWorld) => ({ authorization: `Bearer ${t.token}` });
const put = (t: TestWorld, path: string, body: string) => fetch(url(t, path), { method: "PUT", headers: auth(t), body });
const bytes = (n: number) => "b".repeat(n);

/** What the world's objects take in the bucket, listed. */
async function stored(t: TestWorld): Promise<number> {
  const page = await ms.store.inner.list(`${t.org}/${t.world}/`, undefined, 1000);
  return page.keys.reduce((n, k) => n + k.size, 0);
}

async function expectQuotaExceeded(res: Response, limit: number, bytesInUse: number): Promise<void> {
  expect(res.status).toBe(413);
  const body = (await res.json()) as Record<string, unknown>;
  expect(body).toMatchObject({ type: "/problems/quota-exceeded", quota: "maxStorageBytes", limit, bytesInUse });
  expect(String(body["detail"])).toContain(String(limit));
}

describe("PUT", () => {
  it("is refused past the world's quota with 413 quota-exceeded (limit and bytes in use), storing nothing; a replacement counts only what it adds; a deletion frees", async () => {
    const t = await worldWithQuota(10_000);
    expect((await put(t, "a.bin", bytes(6000))).status).toBe(201);
    const writes = ms.store.writes;
    await expectQuotaExceeded(await put(t, "b.bin", bytes(5000)), 10_000, 6000);
    expect(ms.store.writes).toBe(writes);
    expect((await fetch(url(t, "b.bin"))).status).toBe(404);
    // Replacing a.bin with 9000 bytes adds 3000: within the quota.
    expect((await put(t, "a.bin", bytes(9000))).status).toBe(200);
    expect(await ledger.bytesInUse(t.worldId)).toBe(9000);
    expect((await put(t, "c.bin", bytes(1000))).status).toBe(201);
    await expectQuotaExceeded(await put(t, "d.bin", bytes(1)), 10_000, 10_000);
    expect((await fetch(url(t, "a.bin"), { method: "DELETE", headers: auth(t) })).status).toBe(204);
    expect(await ledger.bytesInUse(t.worldId)).toBe(1000);
    expect((await put(t, "d.bin", bytes(8000))).status).toBe(201);
    expect(await ledger.bytesInUse(t.worldId)).toBe(await stored(t));
  });

  it("takes MAX_STORAGE_BYTES_PER_WORLD when the world has no quota of its own", async () => {
    const t = await worldWithQuota(null);
    expect((await put(t, "a.bin", bytes(40_000))).status).toBe(201);
    await expectQuotaExceeded(await put(t, "b.bin", bytes(20_000)), 50_000, 40_000);
  });

  it("never lets concurrent writes pass the quota together: 20 PUTs of 1000 bytes at once in 10,000, exactly 10 stored", async () => {
    const t = await worldWithQuota(10_000);
    const statuses = await Promise.all(Array.from({ length: 20 }, (_, i) => put(t, `many/${i}.bin`, bytes(1000)).then((r) => r.status)));
    expect(statuses.filter((s) => s === 201)).toHaveLength(10);
    expect(statuses.filter((s) => s === 413)).toHaveLength(10);
    expect(await stored(t)).toBe(10_000);
    expect(await ledger.bytesInUse(t.worldId)).toBe(10_000);
  });

  it("a world's first writes at once are all stored, the count started under them included", async () => {
    const t = await worldWithQuota(null);
    const statuses = await Promise.all(Array.from({ length: 12 }, (_, i) => put(t, `first/${i}.bin`, bytes(100)).then((r) => r.status)));
    expect(statuses).toEqual(Array.from({ length: 12 }, () => 201));
    expect(await ledger.bytesInUse(t.worldId)).toBe(1200);
  });

  it("a count another replica starts while a reservation looks at the world is never read as the world over its limit", async () => {
    const t = await worldWithQuota(null);
    const slugs = { organization: t.org, world: t.world };
    // Whatever the ledger asks PostgreSQL first, another replica counts the world right after it.
    let counted = false;
    const racing = new Proxy(prisma, {
      get(target, property) {
        if (property === "$queryRaw") {
          return async (...args: Parameters<PrismaClient["$queryRaw"]>) => {
            const answer = await target.$queryRaw(...args);
            if (!counted) {
              counted = true;
              await ledger.initialize(slugs, 0);
            }
            return answer;
          };
        }
        const value = Reflect.get(target, property) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const answer = await new WorldStorageLedger(racing).reserve(slugs, 100, 50_000);
    expect(counted).toBe(true);
    // Not counted when it looked (the caller counts, then reserves again), or reserved: never "over".
    expect(["uncounted", "reserved"]).toContain(answer.kind);
    expect(await new WorldStorageLedger(prisma).reserve(slugs, 100, 50_000)).toEqual({ kind: "reserved" });
  });

  it("counts a world whose files were stored before the count existed before its first write", async () => {
    const t = await worldWithQuota(10_000);
    await ms.store.inner.put(`${t.org}/${t.world}/old/one.bin`, Buffer.from(bytes(4000)), "application/octet-stream");
    await ms.store.inner.put(`${t.org}/${t.world}/old/two.bin`, Buffer.from(bytes(3000)), "application/octet-stream");
    expect(await ledger.bytesInUse(t.worldId)).toBeNull();
    await expectQuotaExceeded(await put(t, "new.bin", bytes(4000)), 10_000, 7000);
    expect((await put(t, "new.bin", bytes(3000))).status).toBe(201);
    expect(await ledger.bytesInUse(t.worldId)).toBe(10_000);
  });
});

describe("PATCH", () => {
  it("is refused when its result would take the world past its quota, changing nothing", async () => {
    const t = await worldWithQuota(3000);
    const original = JSON.stringify(sampleWam());
    expect((await put(t, "rooms/hall.wam", original)).status).toBe(201);
    const res = await fetch(url(t, "rooms/hall.wam"), {
      method: "PATCH",
      headers: { ...auth(t), "content-type": "application/json-patch+json" },
      body: JSON.stringify([{ op: "add", path: "/metadata/description", value: bytes(3000) }]),
    });
    await expectQuotaExceeded(res, 3000, original.length);
    expect(await (await fetch(url(t, "rooms/hall.wam"))).text()).toBe(original);
  });
});

describe("POST {base}/upload", () => {
  const upload = async (t: TestWorld, directory: string, files: Record<string, string>) => {
    const form = new FormData();
    form.set("file", new Blob([await makeZip(files)], { type: "application/zip" }), "dist.zip");
    form.set("directory", directory);
    return fetch(`${ms.baseUrl}/${t.org}/${t.world}/upload`, { method: "POST", headers: auth(t), body: form });
  };

  it("counts what it replaces: a directory replaced by one as large passes near the quota; one that grows the world past it is refused, storing nothing", async () => {
    const t = await worldWithQuota(12_000);
    expect((await upload(t, "maps", { "a.bin": bytes(4000), "b.bin": bytes(4000) })).status).toBe(200);
    expect((await put(t, "other.bin", bytes(3000))).status).toBe(201);
    // 11,000 stored; the new maps/ holds 8500 bytes in place of 8000.
    expect((await upload(t, "maps", { "a.bin": bytes(2500), "c.bin": bytes(6000) })).status).toBe(200);
    expect(await ledger.bytesInUse(t.worldId)).toBe(11_500);
    expect(await stored(t)).toBe(11_500);
    // Another directory of 1000 bytes would make 12,500.
    const writes = ms.store.writes;
    await expectQuotaExceeded(await upload(t, `new-${rand()}`, { "x.bin": bytes(1000) }), 12_000, 11_500);
    expect(ms.store.writes).toBe(writes);
    expect(await ledger.bytesInUse(t.worldId)).toBe(11_500);
  });
});
