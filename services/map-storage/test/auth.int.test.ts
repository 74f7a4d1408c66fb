import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { eventually } from "@vw/testing";
import { createTestWorld, rand, sampleWam, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";

let prisma: PrismaClient;
let ms: RunningMapStorage;
let w: TestWorld;
let clock = Date.now();

beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
  ms = await startMapStorage({ API_KEY_CACHE_TTL_MS: "5000" }, { now: () => clock });
});
afterAll(async () => {
  await ms.close();
  await prisma.$disconnect();
});

const put = (token: string | undefined, path = `rooms/${rand()}.wam`, scheme = "Bearer") =>
  fetch(`${ms.baseUrl}/${w.org}/${w.world}/${path}`, {
    method: "PUT",
    headers: token === undefined ? {} : { authorization: `${scheme} ${token}` },
    body: JSON.stringify(sampleWam()),
  });

describe("API keys on map-storage", () => {
  it("refuses a missing key with 401 and WWW-Authenticate: Bearer", async () => {
    const res = await put(undefined);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  });

  it("refuses a malformed header and an unknown key with 401 invalid_token", async () => {
    for (const res of [await put(w.token, undefined, "Basic"), await put("vwk_unknown"), await put(`${w.token} extra`)]) {
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
    }
  });

  it("accepts the world's key and records its last use", async () => {
    expect((await put(w.token)).status).toBe(201);
    const key = await prisma.apiKey.findUniqueOrThrow({ where: { id: w.keyId } });
    // touch() is fire-and-forget: the row is updated a moment later.
    const lastUsedAt = key.lastUsedAt ?? (await eventually("the key's last use is recorded", async () => (await prisma.apiKey.findUniqueOrThrow({ where: { id: w.keyId } })).lastUsedAt, { timeoutMs: 5000, intervalMs: 20 }));
    expect(lastUsedAt).toBeInstanceOf(Date);
  });

  it("refuses a revoked key once the cache entry expires (seconds, not minutes)", async () => {
    const k = await createTestWorld(prisma);
    const own = (token: string) =>
      fetch(`${ms.baseUrl}/${k.org}/${k.world}/r.wam`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: JSON.stringify(sampleWam()) });
    expect([200, 201]).toContain((await own(k.token)).status);
    await prisma.apiKey.update({ where: { id: k.keyId }, data: { revokedAt: new Date() } });
    clock += 5_001;
    const res = await own(k.token);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("invalid_token");
  });

  it("keeps GET public", async () => {
    const path = `rooms/${rand()}.wam`;
    await put(w.token, path);
    expect((await fetch(`${ms.baseUrl}/${w.org}/${w.world}/${path}`)).status).toBe(200);
  });
});
