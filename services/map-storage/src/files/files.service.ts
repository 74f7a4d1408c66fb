import { MAX_JSON_DEPTH, jsonTextDepth } from "@vw/contracts";
import { AppError, parseJsonBytes } from "@vw/service-kit";
import type { Readable } from "node:stream";
import type { Operation } from "fast-json-patch";
import type { FileCache, CachedFile } from "../storage/file-cache.js";
import type { ObjectStore, WriteCondition } from "../storage/object-store.js";
import { ObjectTooLargeError, WriteConflictError } from "../storage/object-store.js";
import type { FileLocks } from "../storage/redis-lock.js";
import { contentTypeFor, isJsonExtension } from "./content-type.js";
import type { FilePath } from "./file-path.js";
import { PatchQueue, assertValidWam, type WriteResult } from "./patch-queue.js";
import { checkWriteConditions, matchesWeak, type EtagCondition, type WriteConditions } from "./preconditions.js";
import { UNCOUNTED_STORAGE, accountedWrite, type WorldStorage } from "./world-storage.js";

export type { WriteResult } from "./patch-queue.js";

export interface FilesServiceOptions {
  maxFileBytes: number;
  /** MAX_JSON_FILE_BYTES: largest JSON file the service parses (a `.wam` body, a file to patch, a patch result), decoded. */
  maxJsonFileBytes: number;
  /** Send If-Match / If-None-Match to S3 on writes (off for backends that reject them). */
  conditionalWrites: boolean;
  /** How many times a write re-reads and re-applies after losing a conditional-write race. */
  maxConflictRetries: number;
  /** Most patches of one file committed in one S3 write. */
  maxPatchGroup: number;
  /** Files larger than this are streamed from S3 to the client, never held whole (the cache's largest entry). */
  streamAboveBytes: number;
}

/** A file's metadata as served. */
export interface FileMeta {
  etag: string;
  contentType: string;
  size: number;
}

/**
 * A GET's answer: 304, or the file, in memory (small and hot files) or as a stream from S3 that
 * the route pipes to the client with backpressure (large files: never read whole).
 */
export type ReadResult = { status: 304; etag: string } | { status: 200; meta: FileMeta; body: Buffer } | { status: 200; meta: FileMeta; stream: Readable };

/** What {@link FilesService.writeUploaded} stores: bytes in memory, or a stream of `length` bytes. */
export type UploadedContent = { body: Buffer } | { open: () => Promise<Readable>; length: number };

const notFound = (fp: FilePath) => new AppError(404, "file-not-found", `No file at '${fp.path}'.`);
const metaOf = (file: CachedFile): FileMeta => ({ etag: file.etag, contentType: file.contentType, size: file.body.length });

/**
 * The file operations of the map storage API. Writes to one file are serialised across instances
 * by {@link FileLocks}; reads are served from {@link FileCache} when its Redis marker vouches for
 * them. Every write is counted against the world's storage quota ({@link WorldStorage}).
 */
export class FilesService {
  private readonly patches: PatchQueue;

  constructor(
    private readonly store: ObjectStore,
    private readonly cache: FileCache,
    private readonly locks: FileLocks,
    private readonly options: FilesServiceOptions,
    private readonly storage: WorldStorage = UNCOUNTED_STORAGE,
  ) {
    this.patches = new PatchQueue({
      locks,
      storage,
      readForWrite: (fp) => this.readForWrite(fp),
      write: (key, body, contentType, cond, attempt) => this.write(key, body, contentType, cond, attempt),
      maxResultBytes: this.maxJsonBytes,
      maxPatchGroup: options.maxPatchGroup,
    });
  }

  /** The cap of a file the service parses: MAX_JSON_FILE_BYTES, or MAX_FILE_BYTES when that is smaller. */
  get maxJsonBytes(): number {
    return Math.min(this.options.maxFileBytes, this.options.maxJsonFileBytes);
  }

  /** GET: 304 when `ifNoneMatch` matches, else the file (streamed when large); 404 when absent. */
  async read(fp: FilePath, ifNoneMatch: EtagCondition | undefined): Promise<ReadResult> {
    const key = fp.objectKey;
    const version = await this.cache.version(key);
    if (version.kind === "deleted") throw notFound(fp);
    if (version.kind === "etag") {
      if (ifNoneMatch !== undefined && matchesWeak(ifNoneMatch, version.etag)) return { status: 304, etag: version.etag };
      const hit = this.cache.cached(key, version.etag);
      if (hit) return { status: 200, meta: metaOf(hit), body: hit.body };
    }
    const opened = await this.store.open(key);
    if (!opened) throw notFound(fp);
    const meta: FileMeta = { etag: opened.etag, contentType: opened.contentType, size: opened.size };
    if (ifNoneMatch !== undefined && matchesWeak(ifNoneMatch, opened.etag)) {
      opened.body.destroy();
      return { status: 304, etag: opened.etag };
    }
    if (opened.size > this.options.streamAboveBytes) return { status: 200, meta, stream: opened.body };
    const chunks: Buffer[] = [];
    for await (const chunk of opened.body) chunks.push(chunk as Buffer);
    const file: CachedFile = { body: Buffer.concat(chunks), etag: opened.etag, contentType: opened.contentType };
    if (version.kind === "unknown") void this.cache.offer(key, file);
    else if (version.kind === "etag" && version.etag === opened.etag) this.cache.remember(key, file);
    return { status: 200, meta: metaOf(file), body: file.body };
  }

  /**
   * A JSON file read whole to be parsed (the room listing): the bytes, or null when the file is
   * larger than `maxBytes`, which is then not read at all.
   */
  async readSmall(fp: FilePath, maxBytes: number): Promise<Buffer | null> {
    const version = await this.cache.version(fp.objectKey);
    if (version.kind === "deleted") throw notFound(fp);
    const hit = version.kind === "etag" ? this.cache.cached(fp.objectKey, version.etag) : undefined;
    if (hit) return hit.body.length > maxBytes ? null : hit.body;
    try {
      const obj = await this.store.get(fp.objectKey, maxBytes);
      if (!obj) throw notFound(fp);
      return obj.body;
    } catch (err) {
      if (err instanceof ObjectTooLargeError) return null;
      throw err;
    }
  }

  /** PUT: create or replace. `.wam` bodies must be a valid WAM file; other files are stored as sent. */
  async put(fp: FilePath, body: Buffer, conditions: WriteConditions): Promise<WriteResult> {
    this.checkSize(body.length, fp.extension === "wam" ? this.maxJsonBytes : this.options.maxFileBytes);
    if (fp.extension === "wam") validateWamBytes(body);
    else if (isJsonExtension(fp.extension)) checkStoredDepth(body, fp, 400);
    const contentType = contentTypeFor(fp.extension);
    const key = fp.objectKey;
    return this.locks.withLock(key, async () => {
      for (let attempt = 0; ; attempt++) {
        const head = await this.store.head(key);
        checkWriteConditions(head?.etag ?? null, conditions);
        const cond: WriteCondition = head ? { ifMatch: head.etag } : { ifNoneMatch: "*" };
        const etag = await accountedWrite(this.storage, fp, body.length - (head?.size ?? 0), () => this.write(key, body, contentType, cond, attempt));
        if (etag) return { created: head === null, etag };
      }
    });
  }

  /** PATCH: JSON Patch applied atomically to the current content, group-committed (see {@link PatchQueue}). */
  patch(fp: FilePath, ops: Operation[], conditions: WriteConditions): Promise<WriteResult> {
    if (!isJsonExtension(fp.extension)) {
      return Promise.reject(new AppError(409, "not-json", `'${fp.path}' is not a JSON file, so a JSON Patch cannot apply to it.`));
    }
    return this.patches.submit(fp, ops, conditions);
  }

  /** DELETE: 404 when absent. */
  async remove(fp: FilePath, conditions: WriteConditions): Promise<void> {
    const key = fp.objectKey;
    await this.locks.withLock(key, async () => {
      const head = await this.store.head(key);
      if (!head) throw notFound(fp);
      checkWriteConditions(head.etag, conditions);
      await this.deleteObject(key);
      await this.storage.adjust(fp, -head.size);
    });
  }

  /**
   * One file of an upload: an unconditional replace under the file's lock, with the cache markers
   * moved as for a PUT. A buffer is kept in the memory cache; a stream (large files) is not. The
   * bytes it adds or frees are counted without a limit: the upload reserved its growth as a whole.
   */
  async writeUploaded(fp: FilePath, contentType: string, content: UploadedContent): Promise<string> {
    const key = fp.objectKey;
    return this.locks.withLock(key, async () => {
      const before = (await this.store.head(key))?.size ?? 0;
      await this.cache.writing(key);
      let etag: string;
      try {
        if ("body" in content) {
          etag = (await this.store.put(key, content.body, contentType)).etag;
          await this.cache.committed(key, { body: content.body, etag, contentType });
        } else {
          etag = (await this.store.putStream(key, await content.open(), content.length, contentType)).etag;
          await this.cache.committedVersion(key, etag);
        }
      } catch (err) {
        await this.cache.abandoned(key);
        throw err;
      }
      await this.storage.adjust(fp, ("body" in content ? content.body.length : content.length) - before);
      return etag;
    });
  }

  /** A file an upload replaced its directory without: deleted under its lock (already gone is fine). */
  async removeReplaced(fp: FilePath): Promise<void> {
    await this.locks.withLock(fp.objectKey, async () => {
      const head = await this.store.head(fp.objectKey);
      if (!head) return;
      await this.deleteObject(fp.objectKey);
      await this.storage.adjust(fp, -head.size);
    });
  }

  private async deleteObject(key: string): Promise<void> {
    await this.cache.writing(key);
    try {
      await this.store.delete(key);
    } catch (err) {
      await this.cache.abandoned(key);
      throw err;
    }
    await this.cache.committed(key, null);
  }

  /**
   * Under the lock the Redis marker is authoritative, so a hot file's bytes come from memory. A
   * file too large (MAX_JSON_FILE_BYTES) or too deep to be parsed safely is refused, never read whole.
   */
  private async readForWrite(fp: FilePath): Promise<CachedFile> {
    const version = await this.cache.version(fp.objectKey);
    if (version.kind === "deleted") throw notFound(fp);
    let file = version.kind === "etag" ? this.cache.cached(fp.objectKey, version.etag) : undefined;
    if (!file) {
      try {
        const obj = await this.store.get(fp.objectKey, this.maxJsonBytes);
        if (!obj) throw notFound(fp);
        file = { body: obj.body, etag: obj.etag, contentType: obj.contentType };
      } catch (err) {
        if (err instanceof ObjectTooLargeError) throw storedTooLarge(fp, err.size, this.maxJsonBytes);
        throw err;
      }
    }
    if (file.body.length > this.maxJsonBytes) throw storedTooLarge(fp, file.body.length, this.maxJsonBytes);
    // A file stored before the nesting limit existed may be deeper than the patch machinery
    // (structuredClone, the patch library, ajv, JSON.stringify) can recurse: refuse, do not crash.
    checkStoredDepth(file.body, fp, 409);
    return file;
  }

  /** Writes under the lock; returns the new ETag, or null when a conditional write lost a race. */
  private async write(key: string, body: Buffer, contentType: string, cond: WriteCondition, attempt: number): Promise<string | null> {
    await this.cache.writing(key);
    try {
      const { etag } = await this.store.put(key, body, contentType, this.options.conditionalWrites ? cond : {});
      await this.cache.committed(key, { body, etag, contentType });
      return etag;
    } catch (err) {
      await this.cache.abandoned(key);
      if (err instanceof WriteConflictError && attempt < this.options.maxConflictRetries) return null;
      if (err instanceof WriteConflictError) {
        throw new AppError(503, "write-conflict", "The file kept changing under this write; retry.", { headers: { "Retry-After": "1" } });
      }
      throw err;
    }
  }

  private checkSize(bytes: number, limit: number): void {
    if (bytes > limit) {
      const which = limit === this.options.maxFileBytes ? "MAX_FILE_BYTES" : "MAX_JSON_FILE_BYTES";
      throw new AppError(413, "payload-too-large", `The file would be ${bytes} bytes; the limit is ${limit} (${which}).`, { limit });
    }
  }
}

function storedTooLarge(fp: FilePath, bytes: number, limit: number): AppError {
  return new AppError(413, "payload-too-large", `The stored '${fp.path}' is ${bytes} bytes, more than the ${limit} (MAX_JSON_FILE_BYTES) a patch can apply to; replace it with PUT.`, {
    limit,
  });
}

/** A .wam body: UTF-8 JSON within the platform's rules (400), then a valid WAM document (422). */
export function validateWamBytes(body: Buffer): void {
  const doc = parseJsonBytes(body, "A .wam file", true);
  assertValidWam(doc, "The body is not a valid WAM file.");
}

/**
 * JSON files nest at most `MAX_JSON_DEPTH` levels: a PUT of a deeper one is refused (400), and a
 * deeper file already stored cannot be patched (409: replace it with PUT).
 */
export function checkStoredDepth(body: Buffer, fp: Pick<FilePath, "path">, status: 400 | 409): void {
  if (jsonTextDepth(body) <= MAX_JSON_DEPTH) return;
  throw tooDeep(fp, status);
}

/** The refusal of {@link checkStoredDepth}. */
export function tooDeep(fp: Pick<FilePath, "path">, status: 400 | 409): AppError {
  const detail =
    status === 400
      ? `'${fp.path}' nests objects and arrays deeper than the limit of ${MAX_JSON_DEPTH} levels.`
      : `The stored '${fp.path}' nests deeper than the limit of ${MAX_JSON_DEPTH} levels, so it cannot be patched; replace it with PUT.`;
  return new AppError(status, "too-deeply-nested", detail, { limit: MAX_JSON_DEPTH });
}
