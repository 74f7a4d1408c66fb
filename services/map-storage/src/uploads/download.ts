/**
 * `GET {base}/download`: a directory of a world as a zip, written with yazl while it is sent. Each
 * file is read from S3 only when the zip reaches it, one at a time, so memory holds a few chunks
 * whatever the directory's size; the response's backpressure paces the reads.
 */
import { PassThrough, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { Response } from "express";
import yazl from "yazl";
import { AppError, type Logger } from "@vw/service-kit";
import type { ObjectStore } from "../storage/object-store.js";

/** Formats that are compressed already: stored as they are, deflating them again costs CPU for nothing. */
const STORED_EXTENSIONS = new Set(["png", "jpg", "jpeg", "gif", "webp", "avif", "mp3", "ogg", "mp4", "webm", "zip", "woff", "woff2"]);

function compressible(path: string): boolean {
  const dot = path.lastIndexOf(".");
  return !STORED_EXTENSIONS.has(dot === -1 ? "" : path.slice(dot + 1).toLowerCase());
}

/** How many of the names left out a download's log line lists. */
const LEFT_OUT_EXAMPLES = 10;

/**
 * Streams every object under `prefix` into a zip on `res`, named relative to the prefix. 404 when
 * there is none (answered before any byte). A failure after the first byte can no longer become a
 * problem document: the response is cut, so the client sees a truncated zip, never a complete
 * wrong one, and the failure is logged. An object whose name a zip cannot hold (a drive letter
 * such as `C:/x.txt`, a name ending in `/`: stored by an older version or another tool) is left
 * out, never a reason to cut the answer: the zip's comment says how many were, and a warning
 * names them.
 */
export async function sendDirectoryZip(store: ObjectStore, prefix: string, archiveName: string, res: Response, logger: Logger): Promise<void> {
  let page = await store.list(prefix, undefined, 1000);
  if (page.keys.length === 0) throw new AppError(404, "file-not-found", "There is no file in this directory.");

  const zip = new yazl.ZipFile();
  res.setHeader("Content-Type", "application/zip");
  res.setHeader("Content-Disposition", `attachment; filename="${archiveName}"`);
  res.setHeader("Cache-Control", "no-store");
  const sent = pipeline(zip.outputStream as unknown as Readable, res);

  const leftOut: string[] = [];
  const add = (key: string) => {
    const name = key.slice(prefix.length);
    try {
      addLazy(name, key);
    } catch {
      // yazl validates the name synchronously (absolute, `..`, trailing `/`) and adds nothing then.
      leftOut.push(name);
    }
  };
  const addLazy = (name: string, key: string) => {
    zip.addReadStreamLazy(name, { compress: compressible(name) }, (cb) => {
      store.getStream(key).then(
        // Deleted since it was listed: an empty entry keeps the zip well-formed.
        (stream) => cb(null, stream ?? Readable.from([])),
        (err: unknown) => {
          logger.error({ err, key }, "download: a file could not be read; the zip is cut");
          const broken = new PassThrough();
          cb(null, broken);
          broken.destroy(err as Error);
          res.destroy(err as Error);
        },
      );
    });
  };
  try {
    for (;;) {
      for (const { key } of page.keys) add(key);
      const last = page.keys[page.keys.length - 1];
      if (!page.truncated || !last) break;
      page = await store.list(prefix, last.key, 1000);
    }
    if (leftOut.length > 0) {
      logger.warn({ prefix, leftOut: leftOut.length, names: leftOut.slice(0, LEFT_OUT_EXAMPLES) }, "download: files whose names a zip cannot hold were left out");
    }
    if (leftOut.length === 0) zip.end();
    else zip.end({ forceZip64Format: false, comment: `${leftOut.length} file(s) left out: their names cannot be stored in a zip (a drive letter, a trailing '/').` });
  } catch (err) {
    logger.error({ err }, "download: listing failed midway; the zip is cut");
    res.destroy(err as Error);
  }
  await sent.catch((err: unknown) => {
    // The client went away, or a read failed (logged above).
    logger.debug({ err }, "download ended early");
  });
}
