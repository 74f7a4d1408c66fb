/**
 * Pieces of the upload part of `pnpm bench map-storage`: the map it publishes, zips (in memory, or
 * streamed to disk for the large one), a multipart POST that streams its file part, and a sampler
 * of a process's resident memory. Dependency-free besides yazl, so the bench can move as it is.
 */
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, readFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import { request } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import yazl from "yazl";

/** `count` files totalling about `totalBytes`: tilesets (random, so incompressible), maps (JSON) and rooms (WAM), as a built map has. */
export function benchMap(count: number, totalBytes: number): Map<string, Buffer> {
  const each = Math.floor(totalBytes / count);
  const files = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    if (i % 20 === 0) {
      const entities: Record<string, unknown> = {};
      for (let e = 0; JSON.stringify(entities).length < each - 400; e++) entities[`chair-${e}`] = { x: e % 640, y: e * 32, prefabRef: { id: "chair", collectionName: "office" } };
      files.set(`rooms/room-${i}.wam`, Buffer.from(JSON.stringify({ version: "2.1.0", mapUrl: `https://maps.example.com/room-${i}.tmj`, entities, areas: [], metadata: { name: `Room ${i}` } })));
    } else if (i % 4 === 0) {
      const layer = Array.from({ length: Math.floor(each / 4) }, (_, k) => (k * 7 + i) % 97);
      files.set(`maps/map-${i}.tmj`, Buffer.from(JSON.stringify({ type: "map", layers: [{ data: layer }] }).padEnd(each, " ")));
    } else {
      files.set(`tilesets/tiles-${i}.png`, randomBytes(each));
    }
  }
  return files;
}

const STORED = /\.(png|jpe?g|gif|webp|zip)$/i;

/** The zip a map author's tool would send: deflated, but not for formats that are compressed already. */
export async function zipOf(files: Map<string, Buffer>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, data] of files) zip.addBuffer(data, name, { compress: !STORED.test(name) });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Writes a zip of `entries` stored entries of `entryBytes` each to `path`, streaming (never all in memory). */
export async function writeLargeZip(path: string, entries: number, entryBytes: number): Promise<number> {
  const block = randomBytes(1024 * 1024);
  const zip = new yazl.ZipFile();
  for (let i = 0; i < entries; i++) {
    const stream = Readable.from(
      (function* () {
        for (let left = entryBytes; left > 0; left -= block.length) yield left >= block.length ? block : block.subarray(0, left);
      })(),
    );
    zip.addReadStream(stream, `big/part-${i}.bin`, { compress: false, size: entryBytes });
  }
  zip.end();
  await pipeline(zip.outputStream as unknown as Readable, createWriteStream(path));
  return (await stat(path)).size;
}

/** `POST <url>` of `multipart/form-data` with the zip (a buffer or a file, streamed) as `file` and `directory`, as the upload tool sends it. */
export async function postUpload(url: string, token: string, directory: string, zip: Buffer | { path: string }): Promise<{ status: number; body: string; ms: number }> {
  const boundary = `----vw-bench-${randomBytes(8).toString("hex")}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="directory"\r\n\r\n${directory}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="dist.zip"\r\nContent-Type: application/zip\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const zipBytes = Buffer.isBuffer(zip) ? zip.length : (await stat(zip.path)).size;
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": head.length + zipBytes + tail.length },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, ms: Number(process.hrtime.bigint() - started) / 1e6 }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.write(head);
    if (Buffer.isBuffer(zip)) {
      req.write(zip);
      req.end(tail);
      return;
    }
    const file = createReadStream(zip.path);
    file.on("error", reject);
    file.pipe(req, { end: false });
    file.on("end", () => req.end(tail));
  });
}

/** Resident memory of process `pid` in bytes (Linux `/proc`), or null when it cannot be read. */
export function rssOf(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Samples `pid`'s RSS every `everyMs` until stopped; returns the peak, and the peak of each tenth of the time (the shape). */
export function sampleRss(pid: number, everyMs = 25): { stop(): { peak: number; samples: number; tenths: number[] } } {
  const seen: number[] = [];
  const timer = setInterval(() => {
    const rss = rssOf(pid);
    if (rss !== null) seen.push(rss);
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      const tenths = Array.from({ length: 10 }, (_, t) => Math.max(0, ...seen.slice(Math.floor((t * seen.length) / 10), Math.floor(((t + 1) * seen.length) / 10))));
      return { peak: Math.max(0, ...seen), samples: seen.length, tenths };
    },
  };
}
