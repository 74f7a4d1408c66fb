import { validateWam } from "@vw/contracts";
import { AppError } from "@vw/service-kit";
import type { Operation } from "fast-json-patch";
import type { FileCache, CachedFile } from "../storage/file-cache.js";
import type { ObjectStore, WriteCondition } from "../storage/object-store.js";
import { WriteConflictError } from "../storage/object-store.js";
import type { FileLocks } from "../storage/redis-lock.js";
import { contentTypeFor, isJsonExtension } from "./content-type.js";
import type { FilePath } from "./file-path.js";
import { applyPatchAtomically } from "./json-patch.js";
import { checkWriteConditions, matchesWeak, type EtagCondition, type WriteConditions } from "./preconditions.js";

export interface FilesServiceOptions {
  maxFileBytes: number;
  /** Send If-Match / If-None-Match to S3 on writes (off for backends that reject them). */
  conditionalWrites: boolean;
  /** How many times a write re-reads and re-applies after losing a conditional-write race. */
  maxConflictRetries: number;
}

export type ReadResult = { status: 200; file: CachedFile } | { status: 304; etag: string };

export interface WriteResult {
  created: boolean;
  etag: string;
}

const notFound = (fp: FilePath) => new AppError(404, "file-not-found", `No file at '${fp.path}'.`);

/**
 * The file operations of the map storage API. Writes to one file are serialised across instances
 * by {@link FileLocks}; reads are served from {@link FileCache} when its Redis marker vouches for them.
 */
export class FilesService {
  constructor(
    private readonly store: ObjectStore,
    private readonly cache: FileCache,
    private readonly locks: FileLocks,
    private readonly options: FilesServiceOptions,
  ) {}

  /** GET: 304 when `ifNoneMatch` matches, else the file; 404 when absent. */
  async read(fp: FilePath, ifNoneMatch: EtagCondition | undefined): Promise<ReadResult> {
    const key = fp.objectKey;
    const version = await this.cache.version(key);
    if (version.kind === "deleted") throw notFound(fp);
    if (version.kind === "etag") {
      if (ifNoneMatch !== undefined && matchesWeak(ifNoneMatch, version.etag)) return { status: 304, etag: version.etag };
      const hit = this.cache.cached(key, version.etag);
      if (hit) return { status: 200, file: hit };
    }
    const obj = await this.store.get(key);
    if (!obj) throw notFound(fp);
    const file: CachedFile = { body: obj.body, etag: obj.etag, contentType: obj.contentType };
    if (version.kind === "unknown") void this.cache.offer(key, file);
    else if (version.kind === "etag" && version.etag === obj.etag) this.cache.remember(key, file);
    if (ifNoneMatch !== undefined && matchesWeak(ifNoneMatch, obj.etag)) return { status: 304, etag: obj.etag };
    return { status: 200, file };
  }

  /** PUT: create or replace. `.wam` bodies must be a valid WAM file; other files are stored as sent. */
  async put(fp: FilePath, body: Buffer, conditions: WriteConditions): Promise<WriteResult> {
    this.checkSize(body.length);
    if (fp.extension === "wam") validateWamBytes(body);
    const contentType = contentTypeFor(fp.extension);
    const key = fp.objectKey;
    return this.locks.withLock(key, async () => {
      for (let attempt = 0; ; attempt++) {
        const head = await this.store.head(key);
        checkWriteConditions(head?.etag ?? null, conditions);
        const cond: WriteCondition = head ? { ifMatch: head.etag } : { ifNoneMatch: "*" };
        const etag = await this.write(key, body, contentType, cond, attempt);
        if (etag) return { created: head === null, etag };
      }
    });
  }

  /** PATCH: JSON Patch applied atomically to the current content; re-applied if a write race is lost. */
  async patch(fp: FilePath, ops: Operation[], conditions: WriteConditions): Promise<WriteResult> {
    if (!isJsonExtension(fp.extension)) {
      throw new AppError(409, "not-json", `'${fp.path}' is not a JSON file, so a JSON Patch cannot apply to it.`);
    }
    const key = fp.objectKey;
    return this.locks.withLock(key, async () => {
      for (let attempt = 0; ; attempt++) {
        const current = await this.readForWrite(fp);
        checkWriteConditions(current.etag, conditions);
        let doc: unknown;
        try {
          doc = JSON.parse(current.body.toString("utf8"));
        } catch {
          throw new AppError(409, "not-json", `The stored content of '${fp.path}' is not JSON, so a JSON Patch cannot apply to it.`);
        }
        const result = applyPatchAtomically(doc, ops);
        if (fp.extension === "wam") assertValidWam(result, "The patched file would not be a valid WAM file; nothing was changed.");
        const body = Buffer.from(JSON.stringify(result), "utf8");
        this.checkSize(body.length);
        const etag = await this.write(key, body, current.contentType, { ifMatch: current.etag }, attempt);
        if (etag) return { created: false, etag };
      }
    });
  }

  /** DELETE: 404 when absent. */
  async remove(fp: FilePath, conditions: WriteConditions): Promise<void> {
    const key = fp.objectKey;
    await this.locks.withLock(key, async () => {
      const head = await this.store.head(key);
      if (!head) throw notFound(fp);
      checkWriteConditions(head.etag, conditions);
      await this.cache.writing(key);
      try {
        await this.store.delete(key);
      } catch (err) {
        await this.cache.abandoned(key);
        throw err;
      }
      await this.cache.committed(key, null);
    });
  }

  /** Under the lock the Redis marker is authoritative, so a hot file's bytes come from memory. */
  private async readForWrite(fp: FilePath): Promise<CachedFile> {
    const version = await this.cache.version(fp.objectKey);
    if (version.kind === "deleted") throw notFound(fp);
    if (version.kind === "etag") {
      const hit = this.cache.cached(fp.objectKey, version.etag);
      if (hit) return hit;
    }
    const obj = await this.store.get(fp.objectKey);
    if (!obj) throw notFound(fp);
    return { body: obj.body, etag: obj.etag, contentType: obj.contentType };
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

  private checkSize(bytes: number): void {
    if (bytes > this.options.maxFileBytes) {
      throw new AppError(413, "payload-too-large", `The file would be ${bytes} bytes; the limit is ${this.options.maxFileBytes}.`, {
        limit: this.options.maxFileBytes,
      });
    }
  }
}

function validateWamBytes(body: Buffer): void {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new AppError(400, "malformed-json", `A .wam file must be JSON: ${(err as Error).message}`);
  }
  assertValidWam(doc, "The body is not a valid WAM file.");
}

function assertValidWam(doc: unknown, detail: string): void {
  const result = validateWam(doc);
  if (!result.ok) throw new AppError(422, "invalid-wam", detail, { errors: result.errors });
}
