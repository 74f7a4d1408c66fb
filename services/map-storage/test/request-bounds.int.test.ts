/**
 * One client cannot exhaust map-storage: each kind of request costs bounded time and memory,
 * measured on map-storage as a process of its own (its RSS sampled from /proc while the attack
 * runs, as a pod's memory limit sees it):
 * - a JSON Patch of 26 `copy` operations of the root (each doubling the document) is refused with
 *   413 at the operation that would cross MAX_JSON_FILE_BYTES, before it runs, `/healthz`
 *   answering meanwhile, RSS growing by less than 150 MB;
 * - 30 readers of a 48 MiB file that stop reading cost less than 256 MB (the file streams from S3
 *   with backpressure), and each is disconnected after SEND_TIMEOUT_MS;
 * - 8 uploads at once, each a zip holding a 48 MiB `.wam`, are each refused with 413 and grow RSS
 *   by less than 300 MB;
 * - a room listing over 24 rooms just under MAX_JSON_FILE_BYTES, each declaring metadata of that
 *   size, twice at once, grows RSS by less than 256 MB (rooms are parsed under one budget of bytes
 *   for the process, and a page keeps only what each declares, within ROOM_DECLARED_MAX_BYTES);
 * - a request whose body stops arriving is answered 408 after REQUEST_TIMEOUT_MS, and one whose
 *   headers stop arriving too.
 * The bounds are of memory and of work, never of time (how fast it goes is `pnpm bench
 * map-storage`'s): each is several times what the service needs here, so they hold with both cores
 * busy, while the unbounded behaviour they replace (hundreds of MB to GB) fails them by far.
 */
import { connect, type Socket } from "node:net";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { Redis } from "ioredis";
import { deleteKeysUnder, eventually, sampleRss, testKeyPrefix } from "@vw/testing";
import { loadConfig } from "../src/config.js";
import { createS3Client } from "../src/storage/s3-object-store.js";
import { createTestWorld, rand, sampleWam, testPrisma, type TestWorld } from "./harness.js";
import { spawnMapStorage, type ServiceProcess } from "./processes.js";
import { declareSize, makeZip } from "./zip-fixtures.js";

const MB = 1024 * 1024;
const SEND_TIMEOUT_MS = 4000;
const redisPrefix = `${testKeyPrefix("ms-bounds-")}:`;
let prisma: PrismaClient;
let w: TestWorld;
let ms: ServiceProcess;

beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
  ms = await spawnMapStorage({
    REDIS_KEY_PREFIX: redisPrefix,
    PLAY_URL: "https://play.example.com",
    LOG_LEVEL: "info",
    SEND_TIMEOUT_MS: String(SEND_TIMEOUT_MS),
    REQUEST_TIMEOUT_MS: "3000",
  });
}, 60_000);

afterAll(async () => {
  if (ms?.child.exitCode === null) await ms.stop();
  const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  await deleteKeysUnder(redis, redisPrefix);
  await redis.quit();
  await prisma.$disconnect();
});

const pid = () => ms.child.pid!;
const fileUrl = (path: string) => `${ms.url}/${w.org}/${w.world}/${path}`;
const auth = () => ({ authorization: `Bearer ${w.token}` });

/** Probes /healthz back to back until `done` resolves, each answered 200; resolves with the number of probes. */
async function probeHealthz(done: Promise<unknown>): Promise<number> {
  let finished = false;
  void done.finally(() => (finished = true));
  let probes = 0;
  while (!finished || probes === 0) {
    expect((await fetch(`${ms.url}/healthz`)).status).toBe(200);
    probes++;
  }
  return probes;
}

describe("a JSON Patch that doubles the document 26 times", () => {
  it("is refused with 413 at the operation that crosses MAX_JSON_FILE_BYTES (none after it runs), /healthz answers meanwhile, RSS grows by less than 150 MB, and the file is unchanged", async () => {
    const path = `rooms/${rand()}.wam`;
    // A room of about 200 KB: each copy of the root doubles it.
    const entities = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`entity-${i}`, { x: i, y: i, prefab: `https://maps.example.com/furniture/chair-${i}.json` }]));
    const original = JSON.stringify(sampleWam({ entities }));
    expect((await fetch(fileUrl(path), { method: "PUT", headers: auth(), body: original })).status).toBe(201);

    const patch = Array.from({ length: 26 }, (_, i) => ({ op: "copy", from: "", path: `/c${i}` }));
    const rss = sampleRss(pid());
    const answer = fetch(fileUrl(path), { method: "PATCH", headers: { ...auth(), "content-type": "application/json-patch+json" }, body: JSON.stringify(patch) });
    await probeHealthz(answer);
    const res = await answer;
    const growth = rss.stop();

    // The work is bounded by construction, not by a clock: the copy that would take the document
    // past 8 MB is refused before it runs, so at most that many doublings were ever made.
    let crossing = 0;
    while (original.length * 2 ** (crossing + 1) <= 8 * MB) crossing += 1;
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ type: "/problems/payload-too-large", limit: 8 * MB, errors: [{ pointer: `/${crossing}` }] });
    expect(growth).toBeLessThan(150 * MB);
    expect(await (await fetch(fileUrl(path))).text()).toBe(original);
  });
});

/** A raw GET that reads its answer's head and a little of the body, then stops reading. */
function pausedReader(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(ms.url).port), "127.0.0.1");
    let received = 0;
    socket.on("error", reject);
    socket.on("data", (chunk: Buffer) => {
      if (received === 0 && !chunk.toString("latin1").startsWith("HTTP/1.1 200")) reject(new Error(chunk.toString("latin1").slice(0, 200)));
      received += chunk.length;
      if (received >= 256 * 1024) {
        socket.pause();
        socket.removeAllListeners("data");
        resolve(socket);
      }
    });
    socket.write(`GET /${w.org}/${w.world}/${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  });
}

/** Reads what is left of a socket's answer to its end; resolves with the bytes. */
function drain(socket: Socket): Promise<number> {
  return new Promise((resolve) => {
    let bytes = 0;
    socket.on("data", (chunk: Buffer) => (bytes += chunk.length));
    socket.on("close", () => resolve(bytes));
    socket.on("error", () => undefined);
    socket.resume();
  });
}

describe("30 readers of a 48 MiB file that stop reading", () => {
  it("cost less than 256 MB (the file streams from S3 with backpressure), and each is disconnected after SEND_TIMEOUT_MS", async () => {
    const path = `big/${rand()}.bin`;
    const size = 48 * MB;
    // Straight to the bucket, so the service's memory holds nothing of the upload.
    const config = loadConfig(process.env);
    const s3 = createS3Client(config.s3);
    await s3.send(new PutObjectCommand({ Bucket: config.s3.bucket, Key: `${w.org}/${w.world}/${path}`, Body: Buffer.alloc(size, 7), ContentLength: size }));
    s3.destroy();

    const rss = sampleRss(pid());
    const sockets = await Promise.all(Array.from({ length: 30 }, () => pausedReader(path)));
    // Every reader is paused: whatever the service still holds for them, it holds now.
    await probeHealthz(new Promise((resolve) => setTimeout(resolve, 2000)));
    const growth = rss.stop();
    expect(growth).toBeLessThan(256 * MB);

    await eventually(
      "the service closed every paused reader's connection",
      () => (ms.stdout().match(/send timeout: the client stopped reading/g) ?? []).length >= 30,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    // Read on now: each answer ends early (cut), never with the whole file.
    const received = await Promise.all(sockets.map(drain));
    for (const bytes of received) expect(bytes).toBeLessThan(size);
  }, 120_000);
});

describe("8 uploads at once, each a zip holding a 48 MiB .wam", () => {
  it("are each refused with 413 and grow RSS by less than 300 MB", async () => {
    // A WAM of 48 MiB (a long description): a zip of a few dozen KB.
    const wam = Buffer.from(JSON.stringify(sampleWam({ metadata: { name: "Huge", description: "x".repeat(48 * MB) } })));
    const honest = await makeZip({ "huge.wam": wam });
    // The same zip declaring 1 KB: refused as it unpacks, not from its headers.
    const lying = declareSize(honest, "huge.wam", 1024);
    const rss = sampleRss(pid());
    const results = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const form = new FormData();
        form.set("file", new Blob([i % 2 === 0 ? honest : lying], { type: "application/zip" }), "dist.zip");
        form.set("directory", `maps-${i}`);
        const res = await fetch(`${ms.url}/${w.org}/${w.world}/upload`, { method: "POST", headers: auth(), body: form });
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      }),
    );
    const growth = rss.stop();
    for (const r of results) expect(r).toMatchObject({ status: 413, body: { type: "/problems/payload-too-large", limit: 8 * MB, file: "huge.wam" } });
    expect(growth).toBeLessThan(300 * MB);
  }, 60_000);
});

describe("GET {base}/rooms over rooms as large as MAX_JSON_FILE_BYTES allows", () => {
  it("answers 200 listing them without their oversized metadata, twice at once, growing RSS by less than 256 MB", async () => {
    const t = await createTestWorld(prisma);
    // Metadata of just under 8 MiB each: before the listing's bounds, a page held them all, twice.
    const room = Buffer.from(JSON.stringify(sampleWam({ metadata: { name: "Big", description: "d".repeat(8 * MB - 4096) } })));
    expect(room.length).toBeLessThanOrEqual(8 * MB);
    const config = loadConfig(process.env);
    const s3 = createS3Client(config.s3);
    for (let i = 0; i < 24; i++) {
      await s3.send(new PutObjectCommand({ Bucket: config.s3.bucket, Key: `${t.org}/${t.world}/rooms/r${String(i).padStart(2, "0")}.wam`, Body: room, ContentLength: room.length }));
    }
    s3.destroy();

    const rss = sampleRss(pid());
    const pages = await Promise.all(
      [0, 1].map(async () => {
        const res = await fetch(`${ms.url}/${t.org}/${t.world}/rooms?limit=100`, { headers: { authorization: `Bearer ${t.token}` } });
        return { status: res.status, body: (await res.json()) as { items: { mapUrl: string | null; metadata: unknown }[] } };
      }),
    );
    const growth = rss.stop();
    for (const page of pages) {
      expect(page.status).toBe(200);
      expect(page.body.items).toHaveLength(24);
      for (const item of page.body.items) expect(item).toMatchObject({ mapUrl: "https://maps.example.com/office.tmj", metadata: null });
    }
    expect(growth).toBeLessThan(256 * MB);
  }, 120_000);
});

describe("a request whose body stops arriving", () => {
  /** Writes `request` (an incomplete one) on a raw connection; resolves with everything received once the service closed it. */
  const unfinished = (request: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(ms.url).port), "127.0.0.1");
      let text = "";
      socket.on("error", reject);
      socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
      socket.on("close", () => resolve(text));
      socket.write(request);
    });

  it("is answered 408 after REQUEST_TIMEOUT_MS and its connection closed", async () => {
    const answer = await unfinished(
      `POST /${w.org}/${w.world}/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${w.token}\r\n` +
        `Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 10000000\r\n\r\n--x\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain("/problems/request-timeout");
  }, 60_000);

  it("and one whose headers stop arriving is answered 408 and its connection closed too (headersTimeout)", async () => {
    const answer = await unfinished(`GET /${w.org}/${w.world}/rooms HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bear`);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  }, 60_000);
});
