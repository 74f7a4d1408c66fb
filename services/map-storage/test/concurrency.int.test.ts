import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { Redis } from "ioredis";
import { testKeyPrefix } from "@vw/testing";
import { createTestWorld, rand, sampleWam, testPrisma, type TestWorld } from "./harness.js";
import { spawnMapStorage, type ServiceProcess } from "./processes.js";

let prisma: PrismaClient;
let w: TestWorld;
let a: ServiceProcess;
let b: ServiceProcess;
const prefix = `${testKeyPrefix("ms-")}:`;

beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
  const env = { REDIS_KEY_PREFIX: prefix, PLAY_URL: "https://play.example.com" };
  [a, b] = await Promise.all([spawnMapStorage(env), spawnMapStorage(env)]);
}, 60_000);

afterAll(async () => {
  if (a?.child.exitCode === null) await a.stop();
  if (b?.child.exitCode === null) await b.stop();
  const redis = new Redis(process.env.REDIS_URL!);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
  await prisma.$disconnect();
});

const fileUrl = (base: string, path: string) => `${base}/${w.org}/${w.world}/${path}`;

describe("two map-storage processes on one file", () => {
  it("50 concurrent PATCHes adding 50 entities end with all 50 present", async () => {
    const path = `rooms/${rand()}.wam`;
    const put = await fetch(fileUrl(a.url, path), { method: "PUT", headers: { authorization: `Bearer ${w.token}` }, body: JSON.stringify(sampleWam()) });
    expect(put.status).toBe(201);

    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        fetch(fileUrl(i % 2 === 0 ? a.url : b.url, path), {
          method: "PATCH",
          headers: { authorization: `Bearer ${w.token}`, "content-type": "application/json-patch+json" },
          body: JSON.stringify([{ op: "add", path: `/entities/e${i}`, value: { i } }]),
        }).then((r) => r.status),
      ),
    );
    expect(results).toEqual(Array(50).fill(200));

    for (const base of [a.url, b.url]) {
      const doc = (await (await fetch(fileUrl(base, path))).json()) as { entities: Record<string, { i: number }> };
      expect(Object.keys(doc.entities).sort()).toEqual(Array.from({ length: 50 }, (_, i) => `e${i}`).sort());
    }
  }, 60_000);

  it("a write through one instance is what the other serves next, even from its cache", async () => {
    const path = `rooms/${rand()}.wam`;
    const headers = { authorization: `Bearer ${w.token}` };
    await fetch(fileUrl(a.url, path), { method: "PUT", headers, body: JSON.stringify(sampleWam({ metadata: { name: "v1" } })) });
    // Warm both caches.
    for (const base of [a.url, b.url, a.url, b.url]) {
      expect(((await (await fetch(fileUrl(base, path))).json()) as { metadata: { name: string } }).metadata.name).toBe("v1");
    }
    for (let v = 2; v <= 6; v++) {
      const writer = v % 2 === 0 ? b.url : a.url;
      const reader = v % 2 === 0 ? a.url : b.url;
      const res = await fetch(fileUrl(writer, path), {
        method: "PATCH",
        headers: { ...headers, "content-type": "application/json-patch+json" },
        body: JSON.stringify([{ op: "replace", path: "/metadata/name", value: `v${v}` }]),
      });
      expect(res.status).toBe(200);
      const etag = res.headers.get("etag");
      const read = await fetch(fileUrl(reader, path));
      expect(read.headers.get("etag")).toBe(etag);
      expect(((await read.json()) as { metadata: { name: string } }).metadata.name).toBe(`v${v}`);
    }
    expect((await fetch(fileUrl(b.url, path), { method: "DELETE", headers })).status).toBe(204);
    expect((await fetch(fileUrl(a.url, path))).status).toBe(404);
  }, 60_000);

  it("shuts down gracefully on SIGTERM: in-flight requests finish, exit code 0", async () => {
    const path = `rooms/${rand()}.wam`;
    const inflight = fetch(fileUrl(a.url, path), { method: "PUT", headers: { authorization: `Bearer ${w.token}` }, body: JSON.stringify(sampleWam()) });
    const [res, code] = await Promise.all([inflight, new Promise<number | null>((r) => setImmediate(() => r(a.stop())))]);
    expect(res.status).toBe(201);
    expect(code).toBe(0);
  }, 30_000);
});
