import { once } from "node:events";
import { request } from "node:http";
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
  // Both started at once; if one fails, the other is stopped too rather than left running after the file.
  const started = await Promise.allSettled([spawnMapStorage(env), spawnMapStorage(env)]);
  const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    for (const r of started) if (r.status === "fulfilled") await r.value.stop();
    throw failed.reason;
  }
  [a, b] = started.map((r) => (r as PromiseFulfilledResult<ServiceProcess>).value) as [ServiceProcess, ServiceProcess];
}, 75_000);

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
    const body = JSON.stringify(sampleWam());
    // `Expect: 100-continue`: the server answers 100 once it has parsed the request, so SIGTERM is
    // sent while the request is provably in flight (not merely sent: on a fast client the signal
    // could otherwise land before the server read a byte, and the test would race).
    const req = request(fileUrl(a.url, path), {
      method: "PUT",
      headers: { authorization: `Bearer ${w.token}`, "content-length": Buffer.byteLength(body), expect: "100-continue" },
    });
    const status = new Promise<number>((resolve, reject) => {
      req.once("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.once("error", reject);
    });
    req.flushHeaders();
    await once(req, "continue");
    const stopped = a.stop();
    req.end(body);
    expect(await status).toBe(201);
    expect(await stopped).toBe(0);
  }, 30_000);
});
