/**
 * Zips for the upload tests, made with yazl, and the hostile variants a tool would never make:
 * entry names and declared sizes rewritten in place in the bytes (yazl itself refuses `..`).
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import yauzl from "yauzl";
import yazl from "yazl";

/** A zip of `files` (path → bytes), deflated. */
export async function makeZip(files: Record<string, Buffer | string>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, data] of Object.entries(files)) zip.addBuffer(Buffer.isBuffer(data) ? data : Buffer.from(data), name);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Replaces every occurrence of the entry name `from` (local header and central directory) by `to`, of the same byte length. */
export function renameEntry(zip: Buffer, from: string, to: string): Buffer {
  const a = Buffer.from(from);
  const b = Buffer.from(to);
  if (a.length !== b.length) throw new Error("renameEntry: names must have the same byte length");
  const out = Buffer.from(zip);
  let found = 0;
  for (let i = out.indexOf(a); i !== -1; i = out.indexOf(a, i + 1)) {
    b.copy(out, i);
    found++;
  }
  if (found === 0) throw new Error(`renameEntry: '${from}' not in the zip`);
  return out;
}

/** Rewrites the uncompressed size the zip declares for `name` (central directory and local header) to `size`. */
export function declareSize(zip: Buffer, name: string, size: number): Buffer {
  const out = Buffer.from(zip);
  const nameBytes = Buffer.from(name);
  for (let i = 0; i < out.length - 4; i++) {
    const sig = out.readUInt32LE(i);
    if (sig === 0x02014b50 && out.subarray(i + 46, i + 46 + nameBytes.length).equals(nameBytes)) out.writeUInt32LE(size, i + 24);
    if (sig === 0x04034b50 && out.subarray(i + 30, i + 30 + nameBytes.length).equals(nameBytes)) out.writeUInt32LE(size, i + 22);
  }
  return out;
}

/** Every file of a zip: name → bytes. */
export async function readZip(zip: Buffer): Promise<Map<string, Buffer>> {
  const archive = await yauzl.fromBufferPromise(zip, { lazyEntries: true });
  const files = new Map<string, Buffer>();
  for await (const entry of archive.eachEntry()) {
    if (entry.fileName.endsWith("/")) continue;
    const chunks: Buffer[] = [];
    for await (const chunk of await archive.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
    files.set(entry.fileName, Buffer.concat(chunks));
  }
  archive.close();
  return files;
}

/** Writes `files` under `root` (creating folders). */
export async function writeTree(root: string, files: Record<string, Buffer | string>): Promise<void> {
  for (const [name, data] of Object.entries(files)) {
    await mkdir(dirname(join(root, name)), { recursive: true });
    await writeFile(join(root, name), data);
  }
}

/** A valid 1x1 PNG: a tileset as far as storage cares. */
export const TINY_PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");

/** A small map as the starter kit's build leaves it in `dist/`: TMJ, PNG tileset, WAM, a script, a dotfile. */
export function starterMap(mapUrl: string, name = "Starter office"): Record<string, Buffer | string> {
  const tmj = { type: "map", version: "1.10", orientation: "orthogonal", width: 2, height: 2, tilewidth: 32, tileheight: 32, layers: [], tilesets: [{ firstgid: 1, image: "tilesets/office.png" }] };
  const wam = {
    version: "2.1.0",
    mapUrl,
    entities: {},
    areas: [],
    entityCollections: [],
    metadata: { name, description: "Where the team meets", thumbnail: "https://maps.example.com/thumb.png", copyright: "CC-BY" },
  };
  return {
    "office.tmj": JSON.stringify(tmj),
    "office.wam": JSON.stringify(wam),
    "tilesets/office.png": TINY_PNG,
    "assets/script.js": "WA.onInit().then(() => console.log('ready'));\n",
    ".DS_Store": "not published",
    "assets/.cache/notes.txt": "not published either",
  };
}
