/**
 * Map authors' own tool against map-storage: `@workadventure/upload-maps` from npm, unchanged, run
 * as its own process the way the Map Starter Kit runs it (`upload.js -u <base> -k <key> -d <dir>`
 * in a project folder holding the build's `dist/`), against a map-storage started here on the real
 * PostgreSQL, Redis and S3-protocol server.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { createTestWorld, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";
import { readZip, starterMap, writeTree } from "./zip-fixtures.js";

const require = createRequire(import.meta.url);
const UPLOAD_JS = join(dirname(require.resolve("@workadventure/upload-maps/package.json")), "dist", "upload.js");

let prisma: PrismaClient;
let ms: RunningMapStorage;
let w: TestWorld;
let other: TestWorld;
const projects: string[] = [];

beforeAll(async () => {
  prisma = testPrisma();
  ms = await startMapStorage();
  [w, other] = await Promise.all([createTestWorld(prisma), createTestWorld(prisma)]);
});

afterAll(async () => {
  await ms.close();
  await prisma.$disconnect();
  await Promise.all(projects.map((p) => rm(p, { recursive: true, force: true })));
});

const base = (t: TestWorld = w) => `${ms.baseUrl}/${t.org}/${t.world}`;

interface ToolRun {
  code: number | null;
  output: string;
}

/** A map project whose `dist/` holds `files`, published with the tool; resolves with its exit code and output. */
async function publish(files: Record<string, Buffer | string>, directory: string, key = w.token, target: TestWorld = w): Promise<ToolRun> {
  const project = await mkdtemp(join(tmpdir(), "vw-map-project-"));
  projects.push(project);
  await writeTree(join(project, "dist"), files);
  const child = spawn(process.execPath, [UPLOAD_JS, "-u", base(target), "-k", key, "-d", directory], {
    cwd: project,
    // As in CI: no terminal, so the tool never prompts; no colours in what it prints.
    env: { PATH: process.env.PATH ?? "", NO_COLOR: "1", FORCE_COLOR: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", resolve);
  });
  return { code, output };
}

async function expectServed(path: string, body: Buffer | string, contentType: string): Promise<void> {
  const res = await fetch(`${base()}/${path}`);
  expect({ path, status: res.status }).toEqual({ path, status: 200 });
  expect({ path, type: res.headers.get("content-type") }).toEqual({ path, type: contentType });
  expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.isBuffer(body) ? body : Buffer.from(body))).toBe(true);
}

const status = async (path: string, t: TestWorld = w) => (await fetch(`${base(t)}/${path}`)).status;

describe("@workadventure/upload-maps against map-storage", () => {
  const mapUrl = () => `${base()}/starter/office.tmj`;

  it("publishes a map: the tool reports success and every file is served byte for byte with its type", async () => {
    const files = starterMap(mapUrl());
    const run = await publish(files, "starter");
    expect(run.output).toContain("Map files uploaded successfully!");
    expect(run.code).toBe(0);

    await expectServed("starter/office.tmj", files["office.tmj"]!, "application/json");
    await expectServed("starter/office.wam", files["office.wam"]!, "application/json");
    await expectServed("starter/tilesets/office.png", files["tilesets/office.png"]!, "image/png");
    await expectServed("starter/assets/script.js", files["assets/script.js"]!, "text/javascript; charset=utf-8");
    // Dot-paths are never published.
    expect(await status("starter/.DS_Store")).toBe(404);
    expect(await status("starter/assets/.cache/notes.txt")).toBe(404);

    const rooms = (await (await fetch(`${base()}/rooms`, { headers: { authorization: `Bearer ${w.token}` } })).json()) as { items: unknown[] };
    expect(rooms.items).toEqual([
      {
        path: "starter/office.wam",
        url: `http://localhost:3001/${w.org}/${w.world}/starter/office.wam`,
        roomUrl: `https://play.example.com/@/${w.org}/${w.world}/starter/office.wam`,
        mapUrl: mapUrl(),
        metadata: { name: "Starter office", description: "Where the team meets", thumbnail: "https://maps.example.com/thumb.png", copyright: "CC-BY" },
      },
    ]);
  }, 60_000);

  it("a second upload replaces the directory: files it lacks are gone, other directories are untouched", async () => {
    const first = await publish({ "keep.txt": "another directory" }, "elsewhere");
    expect(first.code).toBe(0);
    const v1 = await publish(starterMap(mapUrl()), "starter");
    expect(v1.code).toBe(0);

    const v2 = starterMap(mapUrl(), "Starter office, second edition");
    delete v2["assets/script.js"];
    v2["tilesets/new.png"] = Buffer.concat([v2["tilesets/office.png"] as Buffer, Buffer.from([0])]);
    const run = await publish(v2, "starter");
    expect(run.code).toBe(0);

    await expectServed("starter/office.wam", v2["office.wam"]!, "application/json");
    await expectServed("starter/tilesets/new.png", v2["tilesets/new.png"]!, "image/png");
    expect(await status("starter/assets/script.js")).toBe(404);
    await expectServed("elsewhere/keep.txt", "another directory", "text/plain; charset=utf-8");
  }, 60_000);

  it("another world's key is refused and changes nothing", async () => {
    expect((await publish(starterMap(mapUrl()), "starter")).code).toBe(0);
    const before = ms.store.writes;
    const run = await publish({ "intruder.txt": "x" }, "starter", other.token);
    expect(run.code).toBe(1);
    expect(run.output).toContain("Authentication failed");
    expect(ms.store.writes).toBe(before);
    expect(await status("starter/intruder.txt")).toBe(404);
    expect(await status("starter/office.wam")).toBe(200);
  }, 60_000);

  it("an invalid WAM and a 60 MiB entry (60 KB zipped) are refused, and the directory stays as it was", async () => {
    const good = starterMap(mapUrl());
    expect((await publish(good, "starter")).code).toBe(0);
    const before = ms.store.writes;

    const badWam = { ...good, "office.wam": JSON.stringify({ version: "2.1.0", mapUrl: mapUrl(), entities: [], areas: [] }), "new.txt": "new" };
    const refusedWam = await publish(badWam, "starter");
    expect(refusedWam.code).toBe(1);
    expect(refusedWam.output).toContain("Error 400");

    const huge = { ...good, "huge.bin": Buffer.alloc(60 * 1024 * 1024) };
    const refusedHuge = await publish(huge, "starter");
    expect(refusedHuge.code).toBe(1);
    expect(refusedHuge.output).toContain("File too large");

    expect(ms.store.writes).toBe(before);
    expect(await status("starter/new.txt")).toBe(404);
    expect(await status("starter/huge.bin")).toBe(404);
    await expectServed("starter/office.wam", good["office.wam"]!, "application/json");
  }, 90_000);

  it("a download of the directory holds what was uploaded", async () => {
    const files = starterMap(mapUrl());
    expect((await publish(files, "starter")).code).toBe(0);
    const res = await fetch(`${base()}/download?directory=starter`, { headers: { authorization: `Bearer ${w.token}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/zip");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="starter.zip"');
    const zip = await readZip(Buffer.from(await res.arrayBuffer()));
    const published = Object.entries(files).filter(([name]) => !name.split("/").some((s) => s.startsWith(".")));
    expect([...zip.keys()].sort()).toEqual(published.map(([name]) => name).sort());
    for (const [name, data] of published) expect({ name, same: zip.get(name)!.equals(Buffer.from(data)) }).toEqual({ name, same: true });
  }, 60_000);
});
