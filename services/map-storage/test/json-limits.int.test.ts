/**
 * MAX_JSON_FILE_BYTES and MAX_PATCH_OPERATIONS: every JSON file map-storage parses (a `.wam` PUT
 * or upload entry, a file to patch, a patch's result, a room in the listing) has a cap counted in
 * decoded bytes, so `Content-Encoding: gzip` gives no way around it; over it, 413 and nothing is
 * stored. A patch's result is bounded while it is applied, not after.
 */
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { ROOM_DECLARED_MAX_BYTES } from "../src/uploads/rooms.service.js";
import { createTestWorld, rand, sampleWam, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";
import { makeZip } from "./zip-fixtures.js";

const MB = 1024 * 1024;
let prisma: PrismaClient;
let w: TestWorld;
/** Defaults: MAX_JSON_FILE_BYTES 8 MiB, MAX_PATCH_OPERATIONS 1000. */
let ms: RunningMapStorage;
/** MAX_JSON_FILE_BYTES of 1 MiB, so files past it stay small. */
let small: RunningMapStorage;

beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
  [ms, small] = await Promise.all([startMapStorage(), startMapStorage({ MAX_JSON_FILE_BYTES: String(MB) })]);
});
afterAll(async () => {
  await ms.close();
  await small.close();
  await prisma.$disconnect();
});

const url = (m: RunningMapStorage, path: string) => `${m.baseUrl}/${w.org}/${w.world}/${path}`;
const auth = () => ({ authorization: `Bearer ${w.token}` });
const put = (m: RunningMapStorage, path: string, body: Buffer | string, headers: Record<string, string> = {}) => fetch(url(m, path), { method: "PUT", headers: { ...auth(), ...headers }, body });
const patch = (m: RunningMapStorage, path: string, ops: unknown[]) =>
  fetch(url(m, path), { method: "PATCH", headers: { ...auth(), "content-type": "application/json-patch+json" }, body: JSON.stringify(ops) });
const problem = async (res: Response, status: number, type: string) => {
  expect(res.status).toBe(status);
  const body = (await res.json()) as Record<string, unknown>;
  expect(body["type"]).toBe(`/problems/${type}`);
  return body;
};
/** A WAM of about `bytes` bytes (a long description). */
const wamOf = (bytes: number) => JSON.stringify(sampleWam({ metadata: { name: "Big", description: "x".repeat(bytes) } }));

describe("PUT", () => {
  it("refuses a .wam whose gzip body inflates past MAX_JSON_FILE_BYTES with 413 (decoded bytes count) and stores nothing", async () => {
    const path = `rooms/${rand()}.wam`;
    const body = gzipSync(wamOf(40 * MB));
    expect(body.length).toBeLessThan(100 * 1024);
    const writes = ms.store.writes;
    expect(await problem(await put(ms, path, body, { "content-encoding": "gzip" }), 413, "payload-too-large")).toMatchObject({ limit: 8 * MB });
    expect(ms.store.writes).toBe(writes);
    expect((await fetch(url(ms, path))).status).toBe(404);
    // A gzip body within the cap is stored decoded.
    expect((await put(ms, path, gzipSync(wamOf(1000)), { "content-encoding": "gzip" })).status).toBe(201);
    expect(await (await fetch(url(ms, path))).text()).toBe(wamOf(1000));
  });

  it("holds .wam files to MAX_JSON_FILE_BYTES, and files it does not parse (.json included) to MAX_FILE_BYTES only", async () => {
    expect(await problem(await put(small, `rooms/${rand()}.wam`, wamOf(MB + 10)), 413, "payload-too-large")).toMatchObject({ limit: MB });
    expect((await put(small, `assets/${rand()}.json`, JSON.stringify({ data: "x".repeat(2 * MB) }))).status).toBe(201);
  });
});

describe("PATCH", () => {
  it("refuses more than MAX_PATCH_OPERATIONS operations with 413, accepts exactly that many", async () => {
    const path = `rooms/${rand()}.wam`;
    expect((await put(ms, path, JSON.stringify(sampleWam()))).status).toBe(201);
    const ops = (n: number) => Array.from({ length: n }, (_, i) => ({ op: "add", path: `/entities/e${i}`, value: { i } }));
    expect(await problem(await patch(ms, path, ops(1001)), 413, "payload-too-large")).toMatchObject({ limit: 1000 });
    expect((await patch(ms, path, ops(1000))).status).toBe(200);
  });

  it("refuses a patch whose result would pass MAX_JSON_FILE_BYTES at the operation that crosses it, changing nothing", async () => {
    const path = `rooms/${rand()}.wam`;
    const original = JSON.stringify(sampleWam());
    expect((await put(small, path, original)).status).toBe(201);
    const body = await problem(
      await patch(small, path, [
        { op: "add", path: "/metadata/description", value: "y".repeat(600 * 1024) },
        { op: "copy", from: "/metadata/description", path: "/metadata/copy" },
        { op: "copy", from: "/metadata", path: "/entities/m" },
      ]),
      413,
      "payload-too-large",
    );
    expect(body).toMatchObject({ limit: MB, errors: [{ pointer: "/1" }] });
    expect(await (await fetch(url(small, path))).text()).toBe(original);
  });

  it("does not refuse a patch that removes as much as it adds near the cap (the document is measured again)", async () => {
    const path = `rooms/${rand()}.wam`;
    expect((await put(small, path, JSON.stringify(sampleWam({ entities: { big: { s: "a".repeat(600 * 1024) } } })))).status).toBe(201);
    const res = await patch(small, path, [
      { op: "remove", path: "/entities/big" },
      { op: "add", path: "/entities/other", value: { s: "b".repeat(600 * 1024) } },
    ]);
    expect(res.status).toBe(200);
  });

  it("refuses to patch a stored file larger than MAX_JSON_FILE_BYTES (never read whole): 413, replace it with PUT", async () => {
    const path = `assets/${rand()}.json`;
    expect((await put(small, path, JSON.stringify({ data: "x".repeat(2 * MB) }))).status).toBe(201);
    const body = await problem(await patch(small, path, [{ op: "add", path: "/more", value: 1 }]), 413, "payload-too-large");
    expect(body).toMatchObject({ limit: MB });
    expect(String(body["detail"])).toContain("replace it with PUT");
  });
});

describe("GET {base}/rooms", () => {
  it("never parses a room larger than MAX_JSON_FILE_BYTES: it is listed without mapUrl and metadata, and not read", async () => {
    const t = await createTestWorld(prisma);
    const key = (path: string) => `${t.org}/${t.world}/${path}`;
    // Stored straight in the bucket, as before the cap existed.
    await small.store.inner.put(key("big.wam"), Buffer.from(wamOf(2 * MB)), "application/json");
    await small.store.inner.put(key("hall.wam"), Buffer.from(JSON.stringify(sampleWam())), "application/json");
    small.store.reads = [];
    const res = await fetch(`${small.baseUrl}/${t.org}/${t.world}/rooms`, { headers: { authorization: `Bearer ${t.token}` } });
    expect(res.status).toBe(200);
    const { items } = (await res.json()) as { items: { path: string; mapUrl: string | null; metadata: unknown }[] };
    expect(items.map((i) => [i.path, i.mapUrl, i.metadata === null])).toEqual([
      ["big.wam", null, true],
      ["hall.wam", "https://maps.example.com/office.tmj", false],
    ]);
    expect(small.store.reads).not.toContain(key("big.wam"));
  });

  it("lists a room's mapUrl or metadata larger than ROOM_DECLARED_MAX_BYTES as null, keeping the other", async () => {
    const t = await createTestWorld(prisma);
    const put = (path: string, wam: Record<string, unknown>) => small.store.inner.put(`${t.org}/${t.world}/${path}`, Buffer.from(JSON.stringify(wam)), "application/json");
    await put("a.wam", sampleWam({ metadata: { name: "Wordy", description: "w".repeat(ROOM_DECLARED_MAX_BYTES) } }));
    await put("b.wam", sampleWam({ mapUrl: `https://maps.example.com/${"m".repeat(ROOM_DECLARED_MAX_BYTES)}.tmj`, metadata: { name: "Long map" } }));
    await put("c.wam", sampleWam({ metadata: { name: "Fine", description: "f".repeat(ROOM_DECLARED_MAX_BYTES - 100) } }));
    const res = await fetch(`${small.baseUrl}/${t.org}/${t.world}/rooms`, { headers: { authorization: `Bearer ${t.token}` } });
    expect(res.status).toBe(200);
    const { items } = (await res.json()) as { items: { path: string; mapUrl: string | null; metadata: { name?: string } | null }[] };
    expect(items.map((i) => [i.path, i.mapUrl, i.metadata?.name ?? null])).toEqual([
      ["a.wam", "https://maps.example.com/office.tmj", null],
      ["b.wam", null, "Long map"],
      ["c.wam", "https://maps.example.com/office.tmj", "Fine"],
    ]);
  });
});

describe("POST {base}/upload", () => {
  const upload = async (files: Record<string, string>) => {
    const form = new FormData();
    form.set("file", new Blob([await makeZip(files)], { type: "application/zip" }), "dist.zip");
    form.set("directory", `maps-${rand()}`);
    return fetch(`${small.baseUrl}/${w.org}/${w.world}/upload`, { method: "POST", headers: auth(), body: form });
  };

  it("refuses a .wam entry past MAX_JSON_FILE_BYTES with 413 naming it; other JSON entries are held to MAX_FILE_BYTES and their depth scanned as they pass", async () => {
    expect(await problem(await upload({ "big.wam": wamOf(MB + 10) }), 413, "payload-too-large")).toMatchObject({ limit: MB, file: "big.wam" });
    expect((await upload({ "office.wam": JSON.stringify(sampleWam()), "tiles.json": JSON.stringify({ data: "x".repeat(2 * MB) }) })).status).toBe(200);
    const deep = `${"[".repeat(70)}${"]".repeat(70)}`;
    expect(await problem(await upload({ "office.wam": JSON.stringify(sampleWam()), "deep.json": deep }), 400, "too-deeply-nested")).toMatchObject({ file: "deep.json" });
  });
});
