/**
 * The rules of `POST {base}/upload`, `GET {base}/ping`, `GET {base}/rooms` and the reserved root
 * names, with zips no tool would make (entries climbing out, sizes that lie, broken bytes), sent as
 * the upload tool sends them (multipart `file` and `directory`), against the real Redis and S3.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { eventually, testKeyPrefix } from "@vw/testing";
import { createTestWorld, rand, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";
import { connect } from "node:net";
import yauzl from "yauzl";
import { declareSize, makeZip, readZip, renameEntry, starterMap } from "./zip-fixtures.js";

const ADMIN_TOKEN = `operator-${rand(12)}`;
let prisma: PrismaClient;
let a: RunningMapStorage;
let b: RunningMapStorage;
let small: RunningMapStorage;
let w: TestWorld;
let other: TestWorld;

beforeAll(async () => {
  prisma = testPrisma();
  // Two replicas on one Redis prefix (one upload lock), and one with a small MAX_UPLOAD_BYTES.
  const shared = { REDIS_KEY_PREFIX: `${testKeyPrefix("ms-")}:`, ADMIN_TOKEN };
  [a, b, small] = await Promise.all([startMapStorage(shared), startMapStorage(shared), startMapStorage({ MAX_UPLOAD_BYTES: String(1024 * 1024), MAX_FILE_BYTES: String(700 * 1024) })]);
  [w, other] = await Promise.all([createTestWorld(prisma), createTestWorld(prisma)]);
});

afterAll(async () => {
  await a.close();
  await b.close();
  await small.close();
  await prisma.$disconnect();
});

const base = (ms: RunningMapStorage = a, t: TestWorld = w) => `${ms.baseUrl}/${t.org}/${t.world}`;
const auth = (t: TestWorld = w) => ({ authorization: `Bearer ${t.token}` });

async function upload(zip: Buffer, directory: string, ms: RunningMapStorage = a, t: TestWorld = w): Promise<{ status: number; body: Record<string, unknown> }> {
  const form = new FormData();
  form.set("file", new Blob([zip], { type: "application/zip" }), "dist.zip");
  form.set("directory", directory);
  const res = await fetch(`${base(ms, t)}/upload`, { method: "POST", headers: auth(t), body: form });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const status = async (path: string, ms: RunningMapStorage = a) => (await fetch(`${base(ms)}/${path}`)).status;

describe("POST {base}/upload refuses, and a refused upload changes nothing", () => {
  let directory: string;
  beforeAll(async () => {
    directory = `maps-${rand()}`;
    expect((await upload(await makeZip(starterMap("https://maps.example.com/m.tmj")), directory)).status).toBe(200);
  });

  const refused = async (zip: Buffer, expected: { status: number; type: string; file?: string }) => {
    const before = a.store.writes;
    const res = await upload(zip, directory);
    expect({ status: res.status, type: res.body["type"], file: res.body["file"] }).toEqual({ ...expected, type: `/problems/${expected.type}`, file: expected.file });
    expect(a.store.writes).toBe(before);
    expect(await status(`${directory}/office.wam`)).toBe(200);
    expect(await status(`${directory}/added.txt`)).toBe(404);
    return res.body;
  };

  it.each([
    ["a '..' entry", "xx/evil.txt", "../evil.txt"],
    ["an absolute entry", "xevil.txt", "/evil.txt"],
    ["a backslash entry", "a_evil.txt", "a\\evil.txt"],
    ["a drive-letter entry", "C_/evil.txt", "C:/evil.txt"],
    ["a '..' deeper down", "a/xx/xx/evil.txt", "a/../../evil.txt"],
  ])("%s (zip-slip) is a 400 naming it", async (_what, placeholder, name) => {
    const zip = renameEntry(await makeZip({ "added.txt": "new", [placeholder]: "pwned" }), placeholder, name);
    const body = await refused(zip, { status: 400, type: "invalid-path", file: name });
    expect(String(body["detail"])).toContain(name);
  });

  it("an entry that unpacks past MAX_FILE_BYTES while declaring 1 KB is a 413: sizes are counted, not read", async () => {
    const zip = declareSize(await makeZip({ "added.txt": "new", "bomb.bin": Buffer.alloc(60 * 1024 * 1024) }), "bomb.bin", 1024);
    await refused(zip, { status: 413, type: "payload-too-large", file: "bomb.bin" });
  });

  it("a zip unpacking past MAX_UPLOAD_BYTES in all is a 413, and so is one file past MAX_FILE_BYTES", async () => {
    const six = Buffer.alloc(600 * 1024, 1);
    const total = await upload(await makeZip({ "one.bin": six, "two.bin": six }), "x", small);
    expect({ status: total.status, limit: total.body["limit"] }).toEqual({ status: 413, limit: 1024 * 1024 });
    const one = await upload(await makeZip({ "one.bin": Buffer.alloc(800 * 1024) }), "x", small);
    expect({ status: one.status, limit: one.body["limit"], file: one.body["file"] }).toEqual({ status: 413, limit: 700 * 1024, file: "one.bin" });
    expect(small.store.writes).toBe(0);
  });

  it("an invalid WAM is a 400 naming the file and pointing into it", async () => {
    const body = await refused(await makeZip({ "added.txt": "new", "rooms/bad.wam": JSON.stringify({ version: "2.1.0", mapUrl: "x", entities: [], areas: [] }) }), {
      status: 400,
      type: "invalid-wam",
      file: "rooms/bad.wam",
    });
    expect(body["errors"]).toEqual(expect.arrayContaining([expect.objectContaining({ pointer: "/entities" })]));
  });

  it("bytes that are not a zip, a corrupt entry, an empty zip and a reserved name are 400s", async () => {
    await refused(Buffer.from("this is not a zip"), { status: 400, type: "invalid-zip" });
    const good = await makeZip({ "added.txt": "new", "data.txt": "x".repeat(5000) });
    const corrupt = Buffer.from(good);
    // data.txt is the last entry: the bytes just before the central directory are its deflated data.
    const at = corrupt.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])) - 4;
    corrupt[at] = corrupt[at]! ^ 0xff;
    await refused(corrupt, { status: 400, type: "invalid-zip", file: "data.txt" });
    await refused(await makeZip({ ".hidden": "x", "dir/.also": "y" }), { status: 400, type: "invalid-zip" });
    const reserved = await upload(await makeZip({ rooms: "x" }), "/");
    expect({ status: reserved.status, type: reserved.body["type"], file: reserved.body["file"] }).toEqual({ status: 400, type: "/problems/invalid-path", file: "rooms" });
  });

  it("a directory that climbs out, a missing file part and a body that is not multipart are refused", async () => {
    // A drive letter: a zip entry cannot be named so, and any directory is a download's base.
    for (const bad of ["../up", "a/../b", "a\\b", ".git", "C:", "c:/maps", "maps/D:x"]) {
      const res = await upload(await makeZip({ "a.txt": "a" }), bad);
      expect({ bad, status: res.status, pointer: (res.body["errors"] as { pointer: string }[])[0]?.pointer }).toEqual({ bad, status: 400, pointer: "/directory" });
    }
    const form = new FormData();
    form.set("directory", "x");
    const noFile = await fetch(`${base()}/upload`, { method: "POST", headers: auth(), body: form });
    expect(noFile.status).toBe(400);
    const notMultipart = await fetch(`${base()}/upload`, { method: "POST", headers: { ...auth(), "content-type": "application/zip" }, body: await makeZip({ "a.txt": "a" }) });
    expect({ status: notMultipart.status, accept: notMultipart.headers.get("accept-post") }).toEqual({ status: 415, accept: "multipart/form-data" });
  });

  it("without a key it is a 401, with another world's a 403", async () => {
    const form = new FormData();
    form.set("file", new Blob([await makeZip({ "a.txt": "a" })]), "dist.zip");
    expect((await fetch(`${base()}/upload`, { method: "POST", body: form })).status).toBe(401);
    expect((await fetch(`${base()}/upload`, { method: "POST", headers: auth(other), body: form })).status).toBe(403);
  });
});

describe("uploads are safe across replicas and crashes", () => {
  it("two uploads of one directory through two replicas at once end as one of them, never a mix", async () => {
    const directory = `race-${rand()}`;
    const set = (tag: string) => Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`${tag}-${i}.txt`, `${tag} ${i}`]));
    const [ra, rb] = await Promise.all([upload(await makeZip(set("a")), directory, a), upload(await makeZip(set("b")), directory, b)]);
    expect([ra.status, rb.status]).toEqual([200, 200]);
    const present = async (tag: string) => (await Promise.all(Array.from({ length: 40 }, (_, i) => status(`${directory}/${tag}-${i}.txt`)))).filter((s) => s === 200).length;
    const counts = [await present("a"), await present("b")].sort((x, y) => x - y);
    expect(counts).toEqual([0, 40]);
  }, 60_000);

  it("a failure after the new files are written leaves every old and every new file in place", async () => {
    const directory = `crash-${rand()}`;
    expect((await upload(await makeZip({ "old.txt": "old", "both.txt": "v1" }), directory)).status).toBe(200);
    a.store.failDeletes = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    try {
      expect((await upload(await makeZip({ "new.txt": "new", "both.txt": "v2" }), directory)).status).toBe(503);
    } finally {
      a.store.failDeletes = undefined;
    }
    expect([await status(`${directory}/old.txt`), await status(`${directory}/new.txt`)]).toEqual([200, 200]);
    expect(await (await fetch(`${base()}/${directory}/both.txt`)).text()).toBe("v2");
  });
});

describe("uploads in progress at once (MAX_CONCURRENT_UPLOADS)", () => {
  it("an upload waits for a slot, and gets 503 file-busy when none frees within UPLOAD_LOCK_WAIT_MS", async () => {
    const one = await startMapStorage({ MAX_CONCURRENT_UPLOADS: "1", UPLOAD_LOCK_WAIT_MS: "300" });
    const t = await createTestWorld(prisma);
    const socket = connect(Number(new URL(one.baseUrl).port), "127.0.0.1");
    try {
      // An upload whose body stops arriving holds the one slot (it is being spooled).
      await new Promise<void>((resolve) => socket.once("connect", resolve));
      socket.write(
        `POST /${t.org}/${t.world}/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\n` +
          `Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 100000\r\n\r\n--x\r\nContent-Disposition: form-data; name="file"; filename="a.zip"\r\n\r\nPK`,
      );
      const zip = await makeZip({ "a.txt": "a" });
      await eventually("the slow upload holds the slot", async () => (await upload(zip, "x", one, t)).status === 503);
      const busy = await upload(zip, "x", one, t);
      expect({ status: busy.status, type: busy.body["type"] }).toEqual({ status: 503, type: "/problems/file-busy" });
      socket.destroy();
      await eventually("the slot is free again once that upload is gone", async () => (await upload(zip, "x", one, t)).status === 200);
    } finally {
      socket.destroy();
      await one.close();
    }
  });
});

describe("GET {base}/download of names a zip cannot hold", () => {
  it("answers the zip without them (its comment says how many, a log line names them), never by cutting the connection", async () => {
    const t = await createTestWorld(prisma);
    // A drive-letter path, as an older version accepted for an upload's directory.
    for (const path of ["C:/x.txt", "maps/ok.txt"]) {
      expect((await fetch(`${base(a, t)}/${path}`, { method: "PUT", headers: auth(t), body: "content" })).status).toBe(201);
    }
    const res = await fetch(`${base(a, t)}/download`, { headers: auth(t) });
    expect(res.status).toBe(200);
    const zip = Buffer.from(await res.arrayBuffer());
    expect([...(await readZip(zip)).keys()]).toEqual(["maps/ok.txt"]);
    const archive = await yauzl.fromBufferPromise(zip, { lazyEntries: true });
    expect(archive.comment).toContain("1 file(s) left out");
    archive.close();
    // And the log names them, for the operator.
    expect(a.logs).toContainEqual(expect.objectContaining({ msg: "download: files whose names a zip cannot hold were left out", leftOut: 1, names: ["C:/x.txt"] }));
  });
});

describe("ping, rooms and the reserved root names", () => {
  it("GET {base}/ping is 200 without a key, 404 for a world that does not exist", async () => {
    const res = await fetch(`${base()}/ping`);
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 200, body: { status: "ok" } });
    expect((await fetch(`${a.baseUrl}/no-such-org/no-such-world/ping`)).status).toBe(404);
  });

  it("a PUT to a reserved name is refused with a problem saying it is reserved, encoded or not", async () => {
    for (const name of ["ping", "upload", "download", "rooms"]) {
      const res = await fetch(`${base()}/${name}`, { method: "PUT", headers: auth(), body: "x" });
      const body = (await res.json()) as { detail: string };
      expect({ name, status: res.status, reserved: body.detail.includes("reserved") }).toEqual({ name, status: 405, reserved: true });
    }
    const encoded = await fetch(`${base()}/%70ing`, { method: "PUT", headers: auth(), body: "x" });
    expect({ status: encoded.status, reserved: ((await encoded.json()) as { detail: string }).detail.includes("reserved") }).toEqual({ status: 400, reserved: true });
  });

  it("GET {base}/rooms pages through the world's WAM files with the world's key or the operator's token", async () => {
    const t = await createTestWorld(prisma);
    const wam = (name: string) => JSON.stringify({ version: "2.1.0", mapUrl: `https://maps.example.com/${name}.tmj`, entities: {}, areas: [], metadata: { name } });
    const files = { "a.wam": wam("a"), "b/b.wam": wam("b"), "b/tiles.png": "png", "c.wam": wam("c"), "d/e/d.wam": wam("d"), "z.txt": "z" };
    expect((await upload(await makeZip(files), "/", a, t)).status).toBe(200);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: Response = await fetch(`${base(a, t)}/rooms?limit=2${cursor ? `&cursor=${cursor}` : ""}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(res.status).toBe(200);
      const page = (await res.json()) as { items: { path: string; mapUrl: string; metadata: { name: string } }[]; nextCursor: string | null };
      for (const item of page.items) {
        expect(item.mapUrl).toBe(`https://maps.example.com/${item.metadata.name}.tmj`);
        seen.push(item.path);
      }
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(seen).toEqual(["a.wam", "b/b.wam", "c.wam", "d/e/d.wam"]);
    expect((await fetch(`${base(a, t)}/rooms`, { headers: auth(t) })).status).toBe(200);
    expect((await fetch(`${base(a, t)}/rooms`)).status).toBe(401);
    expect((await fetch(`${base(a, t)}/rooms`, { headers: auth(w) })).status).toBe(403);
    expect((await fetch(`${base(a, t)}/rooms?cursor=%21%21`, { headers: auth(t) })).status).toBe(400);
    expect((await fetch(`${base(a, t)}/rooms?limit=0`, { headers: auth(t) })).status).toBe(400);
  });
});
