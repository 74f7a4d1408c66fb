import { validateWam } from "@vw/contracts";
import { AppError, parseJsonBytes } from "@vw/service-kit";
import { contentTypeFor, isJsonExtension } from "../files/content-type.js";
import type { FilePath } from "../files/file-path.js";
import { checkStoredDepth, type FilesService } from "../files/files.service.js";
import type { ObjectStore } from "../storage/object-store.js";
import type { FileLocks } from "../storage/redis-lock.js";
import { mapLimit } from "./map-limit.js";
import { directoryPrefix, planEntry } from "./upload-paths.js";
import { drainEntry, entryName, invalidZip, openEntry, openZip, zipEntries, type EntryBudget, type ZipArchive, type ZipEntry } from "./zip-reader.js";

export interface UploadOptions {
  /** Largest file once unpacked (`MAX_FILE_BYTES`). */
  maxFileBytes: number;
  /** Largest unpacked total of one zip (`MAX_UPLOAD_BYTES`). */
  maxUploadBytes: number;
  /** Most files one zip may publish. */
  maxEntries: number;
  /** How long an upload waits for the previous one of its world (`UPLOAD_LOCK_WAIT_MS`). */
  lockWaitMs: number;
  /** Files written, and stale ones deleted, at once. */
  concurrency: number;
}

/** What an upload published. */
export interface UploadOutcome {
  /** The directory replaced, `""` for the world's root. */
  directory: string;
  /** Every file written, in zip order. */
  files: FilePath[];
  /** Unpacked bytes written. */
  bytes: number;
  /** Files of the directory the zip did not hold, deleted. */
  removed: number;
  /** Entries skipped (directories, paths with a segment starting with '.'). */
  skipped: number;
}

interface PlannedFile {
  entry: ZipEntry;
  name: string;
  file: FilePath;
  bytes: number;
}

/** Files up to this size are written from memory (and so enter the read cache); larger ones stream. */
const IN_MEMORY_BYTES = 1024 * 1024;
/** Large files streamed to S3 at once. */
const LARGE_FILES_IN_FLIGHT = 2;

/**
 * `POST {base}/upload`: replaces a directory of a world with a zip's contents, in two passes over
 * the zip (spooled to a temporary file by the route). The first checks everything (names, sizes as
 * actually unpacked, WAM and JSON rules) and writes nothing, so a refused zip changes nothing. The
 * second, under the world's upload lock (one upload per world at a time across every replica:
 * directories nest, so a per-directory lock could not keep an upload of `/` apart from one of
 * `/maps`), writes every file and only then deletes the files the zip did not hold: a crash in
 * between leaves old and new files side by side, never a file of either missing.
 */
export class UploadService {
  constructor(
    private readonly files: FilesService,
    private readonly store: ObjectStore,
    private readonly locks: FileLocks,
    private readonly options: UploadOptions,
  ) {}

  async upload(org: string, world: string, directory: string, zipPath: string): Promise<UploadOutcome> {
    const zip = await openZip(zipPath);
    try {
      const { planned, skipped } = await this.check(zip, org, world, directory);
      if (planned.length === 0) {
        throw invalidZip("The zip holds no file to publish (directories and paths starting with '.' are skipped); nothing was changed.");
      }
      return await this.locks.withLock(
        `upload:${org}/${world}`,
        async () => {
          // Small files many at a time (latency-bound); large ones, streamed, a few at a time: their
          // throughput is the link's either way, and fewer streams in flight keep memory flat.
          await mapLimit(planned.filter((p) => p.bytes <= IN_MEMORY_BYTES), this.options.concurrency, (p) => this.write(zip, p));
          await mapLimit(planned.filter((p) => p.bytes > IN_MEMORY_BYTES), LARGE_FILES_IN_FLIGHT, (p) => this.write(zip, p));
          const removed = await this.removeStale(directoryPrefix(org, world, directory), new Set(planned.map((p) => p.file.objectKey)));
          return { directory, files: planned.map((p) => p.file), bytes: planned.reduce((n, p) => n + p.bytes, 0), removed, skipped };
        },
        { waitMs: this.options.lockWaitMs, renew: true, busyDetail: "Another upload to this world is in progress; retry when it has finished." },
      );
    } finally {
      zip.close();
    }
  }

  /** Pass 1: every entry read and counted; throws the first refusal. */
  private async check(zip: ZipArchive, org: string, world: string, directory: string): Promise<{ planned: PlannedFile[]; skipped: number }> {
    const planned: PlannedFile[] = [];
    const seen = new Set<string>();
    let total = 0;
    let skipped = 0;
    for await (const entry of zipEntries(zip)) {
      const name = entryName(entry);
      const plan = planEntry(org, world, directory, name);
      if (plan.kind === "skip") {
        skipped++;
        continue;
      }
      if (seen.has(plan.file.path)) throw invalidZip(`The zip holds '${name}' twice.`, name);
      seen.add(plan.file.path);
      if (planned.length >= this.options.maxEntries) {
        throw new AppError(413, "payload-too-large", `The zip holds more than ${this.options.maxEntries} files.`, { limit: this.options.maxEntries });
      }
      // A size the zip declares can only refuse early; what is accepted is what is counted.
      const budget = this.budget(name, total);
      if (entry.uncompressedSize > budget.maxBytes) throw budget.tooLarge(entry.uncompressedSize);
      const json = isJsonExtension(plan.file.extension);
      const { bytes, body } = await drainEntry(zip, entry, name, budget, json);
      total += bytes;
      if (body) checkJsonEntry(plan.file, name, body);
      planned.push({ entry, name, file: plan.file, bytes });
    }
    return { planned, skipped };
  }

  /** The limit of the next entry: its own, or what is left of the zip's, whichever is smaller. */
  private budget(name: string, unpackedSoFar: number): EntryBudget {
    const { maxFileBytes, maxUploadBytes } = this.options;
    const left = maxUploadBytes - unpackedSoFar;
    if (maxFileBytes <= left) {
      return {
        maxBytes: maxFileBytes,
        tooLarge: (bytes) =>
          new AppError(413, "payload-too-large", `The zip entry '${name}' unpacks to more than ${maxFileBytes} bytes (at least ${bytes}); the limit of one file is MAX_FILE_BYTES.`, {
            limit: maxFileBytes,
            file: name,
          }),
      };
    }
    return {
      maxBytes: left,
      tooLarge: () =>
        new AppError(413, "payload-too-large", `The zip unpacks to more than ${maxUploadBytes} bytes (passed at '${name}'); the limit of one upload is MAX_UPLOAD_BYTES.`, {
          limit: maxUploadBytes,
          file: name,
        }),
    };
  }

  /** Pass 2, one file: decompressed again from the temporary zip (its size is known exactly now). */
  private async write(zip: ZipArchive, p: PlannedFile): Promise<void> {
    const contentType = contentTypeFor(p.file.extension);
    const budget: EntryBudget = { maxBytes: p.bytes, tooLarge: () => invalidZip(`The zip entry '${p.name}' changed while it was read.`, p.name) };
    if (p.bytes <= IN_MEMORY_BYTES) {
      const { body } = await drainEntry(zip, p.entry, p.name, budget, true);
      await this.files.writeUploaded(p.file.objectKey, contentType, { body: body! });
      return;
    }
    await this.files.writeUploaded(p.file.objectKey, contentType, {
      open: async () => (await openEntry(zip, p.entry, p.name, budget)).stream,
      length: p.bytes,
    });
  }

  /** Deletes every object under `prefix` that is not in `keep`; returns how many. */
  private async removeStale(prefix: string, keep: Set<string>): Promise<number> {
    const stale: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.store.list(prefix, after, 1000);
      for (const { key } of page.keys) if (!keep.has(key)) stale.push(key);
      const last = page.keys[page.keys.length - 1];
      if (!page.truncated || !last) break;
      after = last.key;
    }
    await mapLimit(stale, this.options.concurrency, (key) => this.files.removeReplaced(key));
    return stale.length;
  }
}

/** A JSON entry obeys what `PUT` enforces: depth for every JSON file, validity for `.wam` (400 naming it). */
function checkJsonEntry(file: FilePath, name: string, body: Buffer): void {
  try {
    if (file.extension !== "wam") {
      checkStoredDepth(body, file, 400);
      return;
    }
    const doc = parseJsonBytes(body, `The zip entry '${name}'`, true);
    const result = validateWam(doc);
    if (!result.ok) {
      throw new AppError(400, "invalid-wam", `The zip entry '${name}' is not a valid WAM file; nothing was changed.`, { file: name, errors: result.errors });
    }
  } catch (err) {
    if (err instanceof AppError && err.extras["file"] === undefined) throw new AppError(err.status, err.code, err.detail, { ...err.extras, file: name });
    throw err;
  }
}
