import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { createTestWorld, rand, sampleWam, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";

const MAX = 64 * 1024;
const PUBLIC = "https://maps.example.com";
let prisma: PrismaClient;
let ms: RunningMapStorage;
let w: TestWorld;
let other: TestWorld;

beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
  other = await createTestWorld(prisma);
  ms = await startMapStorage({ MAX_FILE_BYTES: String(MAX), PUBLIC_MAP_STORAGE_URL: PUBLIC });
});
afterAll(async () => {
  await ms.close();
  await prisma.$disconnect();
});

const url = (path: string, world: TestWorld = w) => `${ms.baseUrl}/${world.org}/${world.world}/${path}`;
const auth = (token = w.token) => ({ authorization: `Bearer ${token}` });

async function put(path: string, body: string | Buffer, headers: Record<string, string> = {}) {
  return fetch(url(path), { method: "PUT", headers: { ...auth(), "content-type": "application/json", ...headers }, body });
}
async function patch(path: string, ops: unknown, headers: Record<string, string> = {}) {
  return fetch(url(path), {
    method: "PATCH",
    headers: { ...auth(), "content-type": "application/json-patch+json", ...headers },
    body: typeof ops === "string" ? ops : JSON.stringify(ops),
  });
}
async function bytes(path: string): Promise<Buffer> {
  const res = await fetch(url(path));
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}
async function expectProblem(res: Response, status: number) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  const body = (await res.json()) as { status: number; type: string; title: string; detail: string; errors?: { pointer: string; detail: string }[] };
  expect(body.status).toBe(status);
  expect(typeof body.detail).toBe("string");
  return body;
}

/** Raw HTTP with the target sent exactly as written (fetch would normalise dot segments). */
function rawRequest(method: string, target: string, headers: Record<string, string> = {}, body?: string) {
  const { hostname, port } = new URL(ms.baseUrl);
  return new Promise<{ status: number; type: string | undefined; body: string }>((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method, path: target, headers }, (res) => {
      let data = "";
      res.on("data", (c) => (data += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, type: res.headers["content-type"], body: data }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("PUT and GET of a WAM file", () => {
  it("creates (201), replaces (200) and serves the exact bytes with an ETag", async () => {
    const path = `rooms/${rand()}.wam`;
    const body = JSON.stringify(sampleWam(), null, 2);
    const created = await put(path, body);
    expect(created.status).toBe(201);
    const out = (await created.json()) as Record<string, string>;
    expect(out.path).toBe(path);
    expect(out.roomUrl).toBe(`https://play.example.com/@/${w.org}/${w.world}/${path}`);
    expect(out.etag).toMatch(/^".+"$/);
    expect(created.headers.get("etag")).toBe(out.etag);
    expect(created.headers.get("location")).toBe(`${PUBLIC}/${w.org}/${w.world}/${path}`);
    expect(out.url).toBe(`${PUBLIC}/${w.org}/${w.world}/${path}`);

    const got = await fetch(url(path));
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe("application/json");
    expect(got.headers.get("etag")).toBe(out.etag);
    expect(Buffer.from(await got.arrayBuffer()).toString()).toBe(body);

    const replaced = await put(path, JSON.stringify(sampleWam({ metadata: { name: "Renamed" } })));
    expect(replaced.status).toBe(200);
    const out2 = (await replaced.json()) as Record<string, string>;
    expect(out2.etag).not.toBe(out.etag);
    expect(JSON.parse((await bytes(path)).toString()).metadata.name).toBe("Renamed");
  });

  it("answers 304 to If-None-Match with the current ETag, and HEAD without a body", async () => {
    const path = `rooms/${rand()}.wam`;
    const etag = (await put(path, JSON.stringify(sampleWam()))).headers.get("etag")!;
    const notModified = await fetch(url(path), { headers: { "if-none-match": etag } });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get("etag")).toBe(etag);
    const stale = await fetch(url(path), { headers: { "if-none-match": '"nope"' } });
    expect(stale.status).toBe(200);
    const head = await fetch(url(path), { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("etag")).toBe(etag);
    expect(await head.text()).toBe("");
  });

  it("uses the world's custom domain in the room URL", async () => {
    const custom = await createTestWorld(prisma, `maps-${rand()}.example.org`);
    const res = await fetch(url("hall.wam", custom), {
      method: "PUT",
      headers: auth(custom.token),
      body: JSON.stringify(sampleWam()),
    });
    expect(res.status).toBe(201);
    const world = await prisma.world.findUniqueOrThrow({ where: { id: custom.worldId } });
    expect(((await res.json()) as Record<string, string>).roomUrl).toBe(`https://${world.customDomain}/@/hall.wam`);
  });

  it("accepts entityCollections of a type other than 'file'", async () => {
    const res = await put(`rooms/${rand()}.wam`, JSON.stringify(sampleWam({ entityCollections: [{ url: "https://x.example.com/c.json", type: "remote" }] })));
    expect(res.status).toBe(201);
  });

  it("answers 404 for a missing file", async () => {
    await expectProblem(await fetch(url(`rooms/${rand()}.wam`)), 404);
  });
});

describe("refused writes leave the stored file byte-for-byte intact", () => {
  let path: string;
  let original: Buffer;
  beforeAll(async () => {
    path = `rooms/${rand()}.wam`;
    original = Buffer.from(JSON.stringify(sampleWam({ entities: { a: { x: 1 } } }), null, 1));
    expect((await put(path, original)).status).toBe(201);
  });
  const intact = async () => expect((await bytes(path)).equals(original)).toBe(true);

  it("invalid WAM: 422 naming each bad field", async () => {
    const bad = { ...sampleWam(), entities: [], areas: {}, mapUrl: 42 };
    const problem = await expectProblem(await put(path, JSON.stringify(bad)), 422);
    const pointers = problem.errors!.map((e) => e.pointer).sort();
    expect(pointers).toEqual(expect.arrayContaining(["/areas", "/entities", "/mapUrl"]));
    await intact();
  });

  it("unknown WAM version: 422 naming the supported ones", async () => {
    const problem = await expectProblem(await put(path, JSON.stringify(sampleWam({ version: "9.9.9" }))), 422);
    expect(JSON.stringify(problem.errors)).toContain("2.1.0");
    expect(problem.errors!.some((e) => e.pointer === "/version")).toBe(true);
    await intact();
  });

  it("a body that is not JSON: 400", async () => {
    await expectProblem(await put(path, "{not json"), 400);
    await intact();
  });

  it("an oversized body: 413", async () => {
    const huge = JSON.stringify(sampleWam({ entities: { big: "x".repeat(MAX) } }));
    await expectProblem(await put(path, huge), 413);
    await intact();
  });

  it("a PATCH that is malformed: 400 with the operation's pointer", async () => {
    const problem = await expectProblem(await patch(path, [{ op: "replace", path: "/metadata/name", value: "ok" }, { op: "jump", path: "/x" }]), 400);
    expect(problem.errors![0]!.pointer).toBe("/1");
    await expectProblem(await patch(path, "not json"), 400);
    await expectProblem(await patch(path, { op: "add" }), 400);
    await intact();
  });

  it("a PATCH with the wrong content type: 415 with Accept-Patch", async () => {
    const res = await patch(path, [{ op: "replace", path: "/metadata/name", value: "x" }], { "content-type": "application/json" });
    await expectProblem(res, 415);
    expect(res.headers.get("accept-patch")).toBe("application/json-patch+json");
    await intact();
  });

  it("a PATCH that cannot apply (failed test, missing path): 409, nothing applied", async () => {
    const problem = await expectProblem(
      await patch(path, [{ op: "replace", path: "/metadata/name", value: "half" }, { op: "test", path: "/metadata/name", value: "other" }]),
      409,
    );
    // Both places: the operation in the patch, and the path in the file it failed on.
    expect(problem.errors![0]!.pointer).toBe("/1");
    expect(problem.errors![0]!.detail).toContain("test at /metadata/name");
    expect(problem.detail).toMatch(/^Operation 1 \(test at \/metadata\/name\) cannot apply/);
    const missing = await expectProblem(await patch(path, [{ op: "remove", path: "/entities/missing" }]), 409);
    expect(missing.errors![0]!.detail).toContain("remove at /entities/missing");
    await intact();
  });

  it("a PATCH whose result is not a valid WAM: 422", async () => {
    const problem = await expectProblem(await patch(path, [{ op: "replace", path: "/entities", value: [] }]), 422);
    expect(problem.errors!.map((e) => e.pointer)).toContain("/entities");
    await expectProblem(await patch(path, [{ op: "remove", path: "/mapUrl" }]), 422);
    await intact();
  });

  it("a PATCH whose result is oversized: 413", async () => {
    await expectProblem(await patch(path, [{ op: "add", path: "/entities/big", value: "y".repeat(MAX) }]), 413);
    await intact();
  });

  it("a failed If-Match: 412", async () => {
    const res = await patch(path, [{ op: "replace", path: "/metadata/name", value: "x" }], { "if-match": '"stale"' });
    await expectProblem(res, 412);
    await expectProblem(await put(path, JSON.stringify(sampleWam()), { "if-none-match": "*" }), 412);
    await intact();
  });

  it("a key of another world: 403, and no key: 401", async () => {
    await expectProblem(await fetch(url(path), { method: "PUT", headers: auth(other.token), body: JSON.stringify(sampleWam()) }), 403);
    await expectProblem(await fetch(url(path), { method: "DELETE" }), 401);
    await intact();
  });
});

describe("PATCH", () => {
  it("applies a JSON Patch and honours a matching If-Match", async () => {
    const path = `rooms/${rand()}.wam`;
    const etag = (await put(path, JSON.stringify(sampleWam()))).headers.get("etag")!;
    const res = await patch(
      path,
      [
        { op: "replace", path: "/metadata/name", value: "Patched" },
        { op: "add", path: "/entities/chair", value: { x: 3, y: 4 } },
        { op: "test", path: "/version", value: "2.1.0" },
      ],
      { "if-match": etag },
    );
    expect(res.status).toBe(200);
    const out = (await res.json()) as Record<string, string>;
    expect(out.etag).not.toBe(etag);
    const doc = JSON.parse((await bytes(path)).toString());
    expect(doc.metadata.name).toBe("Patched");
    expect(doc.entities.chair).toEqual({ x: 3, y: 4 });
  });

  it("concurrent patches of one file: each applies or fails on its own, none is lost", async () => {
    const path = `rooms/${rand()}.wam`;
    await put(path, JSON.stringify(sampleWam()));
    const statuses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        patch(
          path,
          i % 3 === 2
            ? [{ op: "add", path: `/entities/bad${i}`, value: 1 }, { op: "replace", path: "/entities", value: [] }]
            : [{ op: "add", path: `/entities/e${i}`, value: { i } }],
        ).then((r) => r.status),
      ),
    );
    expect(statuses).toEqual(Array.from({ length: 30 }, (_, i) => (i % 3 === 2 ? 422 : 200)));
    const doc = JSON.parse((await bytes(path)).toString()) as { entities: Record<string, unknown> };
    expect(Object.keys(doc.entities).sort()).toEqual(
      Array.from({ length: 30 }, (_, i) => i).filter((i) => i % 3 !== 2).map((i) => `e${i}`).sort(),
    );
  });

  it("patches other JSON files without WAM rules, and refuses non-JSON files with 409", async () => {
    const path = `data/${rand()}.json`;
    expect((await put(path, JSON.stringify({ a: 1 }))).status).toBe(201);
    expect((await patch(path, [{ op: "add", path: "/b", value: [1] }])).status).toBe(200);
    expect(JSON.parse((await bytes(path)).toString())).toEqual({ a: 1, b: [1] });
    const txt = `notes/${rand()}.txt`;
    expect((await put(txt, "hello")).status).toBe(201);
    await expectProblem(await patch(txt, [{ op: "add", path: "/b", value: 1 }]), 409);
  });

  it("answers 404 for a missing file and refuses prototype pollution", async () => {
    await expectProblem(await patch(`rooms/${rand()}.wam`, [{ op: "add", path: "/entities/x", value: 1 }]), 404);
    const path = `rooms/${rand()}.wam`;
    await put(path, JSON.stringify(sampleWam()));
    const res = await patch(path, [{ op: "add", path: "/__proto__/polluted", value: true }]);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("other files", () => {
  it("round-trips a PNG byte-identical with its content type", async () => {
    const png = Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 37) % 256))]);
    const path = `tiles/${rand()}.png`;
    const res = await fetch(url(path), { method: "PUT", headers: { ...auth(), "content-type": "application/octet-stream" }, body: png });
    expect(res.status).toBe(201);
    expect(((await res.json()) as Record<string, unknown>).roomUrl).toBeUndefined();
    const got = await fetch(url(path));
    expect(got.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await got.arrayBuffer()).equals(png)).toBe(true);
  });

  it("deletes (204), then 404 on GET and on a second DELETE", async () => {
    const path = `tiles/${rand()}.png`;
    await put(path, Buffer.from([1, 2, 3]));
    expect((await fetch(url(path), { method: "DELETE", headers: auth() })).status).toBe(204);
    await expectProblem(await fetch(url(path)), 404);
    await expectProblem(await fetch(url(path), { method: "DELETE", headers: auth() }), 404);
  });
});

describe("path safety", () => {
  it.each([
    ["dot-dot", (o: string) => `${o}/../escape.wam`],
    ["encoded dot-dot", (o: string) => `${o}/%2e%2e/escape.wam`],
    ["encoded slash", (o: string) => `${o}/a%2fb.wam`],
    ["backslash", (o: string) => `${o}/a\\b.wam`],
    ["empty segment", (o: string) => `${o}//b.wam`],
  ])("refuses %s with 400 before touching storage", async (_name, make) => {
    const before = ms.store.calls;
    for (const method of ["GET", "PUT", "PATCH", "DELETE"]) {
      const withBody = method === "PUT" || method === "PATCH";
      const res = await rawRequest(method, `/${make(`${w.org}/${w.world}`)}`, { ...auth(), "content-type": "application/json-patch+json" }, withBody ? "[]" : undefined);
      expect(res.status).toBe(400);
      expect(res.type).toMatch(/^application\/problem\+json/);
    }
    expect(ms.store.calls).toBe(before);
  });
});

describe("schemas", () => {
  it("serves the WAM schema of each known version and 404 for others", async () => {
    const res = await fetch(`${ms.baseUrl}/schemas/wam/2.1.0.json`);
    expect(res.status).toBe(200);
    const schema = (await res.json()) as Record<string, unknown>;
    expect(schema.$schema).toBe("https://json-schema.org/draft/2020-12/schema");
    expect(schema.$id).toBe(`${PUBLIC}/schemas/wam/2.1.0.json`);
    await expectProblem(await fetch(`${ms.baseUrl}/schemas/wam/9.9.9.json`), 404);
  });
});

describe("method and health", () => {
  it("answers 405 with Allow for other methods, and health routes", async () => {
    const res = await fetch(url("x.wam"), { method: "POST", headers: auth() });
    await expectProblem(res, 405);
    expect(res.headers.get("allow")).toContain("PATCH");
    expect((await fetch(`${ms.baseUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${ms.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { checks: { name: string }[] }).checks.map((c) => c.name).sort()).toEqual(["database", "redis", "s3"]);
  });

  it("answers /readyz 503 naming s3 when it is unreachable, without the error, address or port", async () => {
    const down = await startMapStorage({ S3_ENDPOINT: "http://127.0.0.1:9" });
    try {
      const ready = await fetch(`${down.baseUrl}/readyz`);
      const text = await ready.text();
      expect(ready.status).toBe(503);
      expect(JSON.parse(text)).toEqual({ status: "unavailable", checks: [{ name: "s3", ok: false }, { name: "database", ok: true }, { name: "redis", ok: true }] });
      expect(text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|:9\b/);
    } finally {
      await down.close();
    }
  });
});
