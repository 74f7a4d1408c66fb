import { JsonDepthScanner, MAX_JSON_DEPTH, validateWam } from "@vw/contracts";
import { AppError, parseJsonBytes } from "@vw/service-kit";
import { contentTypeFor, isJsonExtension } from "../files/content-type.js";
import type { FilePath } from "../files/file-path.js";
import { tooDeep, type FilesService } from "../files/files.service.js";
import { UNCOUNTED_STORAGE, type WorldStorage } from "../files/world-storage.js";
import type { ObjectStore } from "../storage/object-store.js";
import type { FileLocks } from "../storage/redis-lock.js";
import { mapLimit } from "./map-limit.js";
import { directoryPrefix, planEntry } from "./upload-paths.js";
import { drainEntry, entryName, invalidZip, openEntry, openZip, zipEntries, type EntryBudget, type ZipArchive, type ZipEntry } from "./zip-reader.js";

export interface UploadOptions {
  /** Largest file once unpacked (`MAX_FILE_BYTES`). */
  maxFileBytes: number;
  /** Largest `.wam` once unpacked (`MAX_JSON_FILE_BYTES`): it is parsed. */
  maxJsonFileBytes: number;
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
 * the zip (spooled to a temporary file by the route), both under the world's upload lock (one
 * upload per world at a time across every replica: directories nest, so a per-directory lock
 * could not keep an upload of `/` apart from one of `/maps`; and one world's uploads never check
 * side by side, so a key holder cannot multiply the memory a check holds). The first pass checks
 * everything (names, sizes as actually unpacked, WAM and JSON rules, the world's storage quota,
 * counting what the upload replaces) and writes nothing, so a refused zip changes nothing. The
 * second writes every file and only then deletes the files the zip did not hold: a crash in
 * between leaves old and new files side by side, never a file of either missing.
 */
export class UploadService {
  constructor(
    private readonly files: FilesService,
    private readonly store: ObjectStore,
    private readonly locks: FileLocks,
    private readonly options: UploadOptions,
    private readonly storage: WorldStorage = UNCOUNTED_STORAGE,
  ) {}

  async upload(org: string, world: string, directory: string, zipPath: string): Promise<UploadOutcome> {
    const zip = await openZip(zipPath);
    try {
      return await this.locks.withLock(
        `upload:${org}/${world}`,
        async () => {
          const { planned, skipped } = await this.check(zip, org, world, directory);
          if (planned.length === 0) {
            throw invalidZip("The zip holds no file to publish (directories and paths starting with '.' are skipped); nothing was changed.");
          }
          const bytes = planned.reduce((n, p) => n + p.bytes, 0);
          const existing = await this.listDirectory(directoryPrefix(org, world, directory));
          // What the world holds after the upload: the directory's files are replaced, so its
          // current bytes are given back as the new ones come in. The growth is reserved as a
          // whole first (a refusal writes nothing); each write and deletion then counts its own bytes.
          const growth = bytes - existing.reduce((n, o) => n + o.size, 0);
          const ref = { organization: org, world };
          if (growth > 0) await this.storage.reserve(ref, growth);
          try {
            // Small files many at a time (latency-bound); large ones, streamed, a few at a time: their
            // throughput is the link's either way, and fewer streams in flight keep memory flat.
            await mapLimit(planned.filter((p) => p.bytes <= IN_MEMORY_BYTES), this.options.concurrency, (p) => this.write(zip, p));
            await mapLimit(planned.filter((p) => p.bytes > IN_MEMORY_BYTES), LARGE_FILES_IN_FLIGHT, (p) => this.write(zip, p));
            const keep = new Set(planned.map((p) => p.file.objectKey));
            const stale = existing.filter((o) => !keep.has(o.key));
            await mapLimit(stale, this.options.concurrency, (o) => this.files.removeReplaced(fileAt(org, world, o.key)));
            return { directory, files: planned.map((p) => p.file), bytes, removed: stale.length, skipped };
          } finally {
            // The writes and deletions have counted themselves: the reservation is given back.
            if (growth > 0) await this.storage.adjust(ref, -growth);
          }
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
      const budget = this.budget(name, total, plan.file.extension === "wam");
      if (entry.uncompressedSize > budget.maxBytes) throw budget.tooLarge(entry.uncompressedSize);
      const bytes = await checkEntry(zip, entry, name, plan.file, budget);
      total += bytes;
      planned.push({ entry, name, file: plan.file, bytes });
    }
    return { planned, skipped };
  }

  /**
   * The limit of the next entry: its own (MAX_FILE_BYTES; MAX_JSON_FILE_BYTES for a `.wam`, which
   * is parsed), or what is left of the zip's, whichever is smaller.
   */
  private budget(name: string, unpackedSoFar: number, parsed: boolean): EntryBudget {
    const { maxFileBytes, maxJsonFileBytes, maxUploadBytes } = this.options;
    const own = parsed ? Math.min(maxFileBytes, maxJsonFileBytes) : maxFileBytes;
    const left = maxUploadBytes - unpackedSoFar;
    if (own <= left) {
      const variable = own === maxFileBytes ? "MAX_FILE_BYTES" : "MAX_JSON_FILE_BYTES";
      return {
        maxBytes: own,
        tooLarge: (bytes) =>
          new AppError(413, "payload-too-large", `The zip entry '${name}' unpacks to more than ${own} bytes (at least ${bytes}); the limit of one file is ${variable}.`, {
            limit: own,
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
      const { body } = await drainEntry(zip, p.entry, p.name, budget, { keep: true });
      await this.files.writeUploaded(p.file, contentType, { body: body! });
      return;
    }
    await this.files.writeUploaded(p.file, contentType, {
      open: async () => (await openEntry(zip, p.entry, p.name, budget)).stream,
      length: p.bytes,
    });
  }

  /** Every object under `prefix`, with its size. */
  private async listDirectory(prefix: string): Promise<{ key: string; size: number }[]> {
    const found: { key: string; size: number }[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.store.list(prefix, after, 1000);
      found.push(...page.keys);
      const last = page.keys[page.keys.length - 1];
      if (!page.truncated || !last) return found;
      after = last.key;
    }
  }
}

/** The file an object key of world `org/world` stands for (keys listed from the bucket). */
function fileAt(org: string, world: string, key: string): FilePath {
  const path = key.slice(`${org}/${world}/`.length);
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  return { organization: org, world, path, objectKey: key, extension: dot > 0 ? name.slice(dot + 1).toLowerCase() : "" };
}

/**
 * Reads one entry through, counting its bytes; a JSON entry obeys what `PUT` enforces: a `.wam` is
 * kept (at most MAX_JSON_FILE_BYTES) and validated, any other JSON file's depth is scanned as it
 * passes, never held. Resolves with the entry's size; throws 400 naming it.
 */
async function checkEntry(zip: ZipArchive, entry: ZipEntry, name: string, file: FilePath, budget: EntryBudget): Promise<number> {
  if (file.extension === "wam") {
    const { bytes, body } = await drainEntry(zip, entry, name, budget, { keep: true });
    checkWamEntry(name, body!);
    return bytes;
  }
  if (!isJsonExtension(file.extension)) return (await drainEntry(zip, entry, name, budget)).bytes;
  const depth = new JsonDepthScanner();
  const { bytes } = await drainEntry(zip, entry, name, budget, { observe: (chunk) => depth.feed(chunk) });
  if (depth.max > MAX_JSON_DEPTH) throw withFile(tooDeep(file, 400), name);
  return bytes;
}

const withFile = (err: AppError, name: string) => new AppError(err.status, err.code, err.detail, { ...err.extras, file: name });

/** A `.wam` entry obeys what `PUT` enforces: valid JSON within the platform's rules, then valid WAM (400 naming it). */
function checkWamEntry(name: string, body: Buffer): void {
  try {
    const doc = parseJsonBytes(body, `The zip entry '${name}'`, true);
    const result = validateWam(doc);
    if (!result.ok) {
      throw new AppError(400, "invalid-wam", `The zip entry '${name}' is not a valid WAM file; nothing was changed.`, { file: name, errors: result.errors });
    }
  } catch (err) {
    if (err instanceof AppError && err.extras["file"] === undefined) throw withFile(err, name);
    throw err;
  }
}
