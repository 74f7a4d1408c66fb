import { MAX_JSON_DEPTH, checkJsonValue, jsonTextDepth, validateWam } from "@vw/contracts";
import { AppError, parseJsonBytes } from "@vw/service-kit";
import type { Readable } from "node:stream";
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
  /** Most patches of one file committed in one S3 write. */
  maxPatchGroup: number;
}

export type ReadResult = { status: 200; file: CachedFile } | { status: 304; etag: string };

interface PendingPatch {
  ops: Operation[];
  conditions: WriteConditions;
  resolve: (r: WriteResult) => void;
  reject: (err: unknown) => void;
}

/** The next group: a conditional patch alone, or unconditional ones up to `max`. */
function takeGroup(queue: PendingPatch[], max: number): PendingPatch[] {
  const first = queue[0]!;
  const conditional = (p: PendingPatch) => p.conditions.ifMatch !== undefined || p.conditions.ifNoneMatch !== undefined;
  if (conditional(first)) return queue.splice(0, 1);
  let n = 1;
  while (n < queue.length && n < max && !conditional(queue[n]!)) n++;
  return queue.splice(0, n);
}

/** What {@link FilesService.writeUploaded} stores: bytes in memory, or a stream of `length` bytes. */
export type UploadedContent = { body: Buffer } | { open: () => Promise<Readable>; length: number };

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
  private readonly patchQueues = new Map<string, PendingPatch[]>();

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
    else if (isJsonExtension(fp.extension)) checkStoredDepth(body, fp, 400);
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

  /**
   * PATCH: JSON Patch applied atomically to the current content. Patches of one file waiting in this
   * instance are group-committed: applied in arrival order, each on its own (one that fails is
   * refused alone and changes nothing), then written in one S3 PUT. A conditional patch (If-Match)
   * heads a group of its own, so it is checked against a stored ETag.
   */
  patch(fp: FilePath, ops: Operation[], conditions: WriteConditions): Promise<WriteResult> {
    if (!isJsonExtension(fp.extension)) {
      return Promise.reject(new AppError(409, "not-json", `'${fp.path}' is not a JSON file, so a JSON Patch cannot apply to it.`));
    }
    return new Promise<WriteResult>((resolve, reject) => {
      const item: PendingPatch = { ops, conditions, resolve, reject };
      const queue = this.patchQueues.get(fp.objectKey);
      if (queue) {
        queue.push(item);
        return;
      }
      const fresh = [item];
      this.patchQueues.set(fp.objectKey, fresh);
      void this.drainPatches(fp, fresh);
    });
  }

  private async drainPatches(fp: FilePath, queue: PendingPatch[]): Promise<void> {
    const key = fp.objectKey;
    try {
      await this.locks.withLock(key, async () => {
        for (;;) {
          // Deleted synchronously when empty, so a patch arriving later starts a new drain.
          if (queue.length === 0) {
            this.patchQueues.delete(key);
            return;
          }
          const batch = takeGroup(queue, this.options.maxPatchGroup);
          try {
            await this.commitGroup(fp, batch);
          } catch (err) {
            for (const item of batch) item.reject(err);
          }
        }
      });
    } catch (err) {
      // The lock could not be had: everything still waiting fails the same way.
      if (this.patchQueues.get(key) === queue) this.patchQueues.delete(key);
      for (const item of queue.splice(0)) item.reject(err);
    }
  }

  /** Applies a group under the lock and writes it once; settles every item of the group. */
  private async commitGroup(fp: FilePath, group: PendingPatch[]): Promise<void> {
    let pending = group;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const current = await this.readForWrite(fp);
      // A file stored before the nesting limit existed may be deeper than the patch machinery
      // (structuredClone, the patch library, ajv, JSON.stringify) can recurse: refuse, do not crash.
      checkStoredDepth(current.body, fp, 409);
      let doc: unknown;
      try {
        doc = JSON.parse(current.body.toString("utf8"));
      } catch {
        throw new AppError(409, "not-json", `The stored content of '${fp.path}' is not JSON, so a JSON Patch cannot apply to it.`);
      }
      const applied: PendingPatch[] = [];
      for (const item of pending) {
        try {
          checkWriteConditions(current.etag, item.conditions);
          const next = applyPatchAtomically(doc, item.ops);
          assertWithinJsonRules(next);
          if (fp.extension === "wam") assertValidWam(next, "The patched file would not be a valid WAM file; nothing was changed.");
          doc = next;
          applied.push(item);
        } catch (err) {
          item.reject(err);
        }
      }
      if (applied.length === 0) return;
      const body = Buffer.from(JSON.stringify(doc), "utf8");
      if (body.length > this.options.maxFileBytes && applied.length > 1) {
        // Rare: find which patch crosses the limit by committing them one by one.
        for (const item of applied) await this.commitGroup(fp, [item]).catch((err: unknown) => item.reject(err));
        return;
      }
      this.checkSize(body.length);
      const etag = await this.write(fp.objectKey, body, current.contentType, { ifMatch: current.etag }, attempt);
      if (etag) {
        for (const item of applied) item.resolve({ created: false, etag });
        return;
      }
      pending = applied; // lost a conditional-write race: re-read and re-apply
    }
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

  /**
   * One file of an upload: an unconditional replace under the file's lock, with the cache markers
   * moved as for a PUT. A buffer is kept in the memory cache; a stream (large files) is not.
   */
  async writeUploaded(key: string, contentType: string, content: UploadedContent): Promise<string> {
    return this.locks.withLock(key, async () => {
      await this.cache.writing(key);
      try {
        if ("body" in content) {
          const { etag } = await this.store.put(key, content.body, contentType);
          await this.cache.committed(key, { body: content.body, etag, contentType });
          return etag;
        }
        const { etag } = await this.store.putStream(key, await content.open(), content.length, contentType);
        await this.cache.committedVersion(key, etag);
        return etag;
      } catch (err) {
        await this.cache.abandoned(key);
        throw err;
      }
    });
  }

  /** A file an upload replaced its directory without: deleted under its lock (already gone is fine). */
  async removeReplaced(key: string): Promise<void> {
    await this.locks.withLock(key, async () => {
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
  const detail =
    status === 400
      ? `'${fp.path}' nests objects and arrays deeper than the limit of ${MAX_JSON_DEPTH} levels.`
      : `The stored '${fp.path}' nests deeper than the limit of ${MAX_JSON_DEPTH} levels, so it cannot be patched; replace it with PUT.`;
  throw new AppError(status, "too-deeply-nested", detail, { limit: MAX_JSON_DEPTH });
}

/** The patched document must still be acceptable platform JSON (the patch may add depth). */
function assertWithinJsonRules(doc: unknown): void {
  const errors = checkJsonValue(doc);
  if (errors.length > 0) {
    throw new AppError(422, "too-deeply-nested", `The patched file would break the platform's JSON rules (at most ${MAX_JSON_DEPTH} levels); nothing was changed.`, {
      errors,
      limit: MAX_JSON_DEPTH,
    });
  }
}

function assertValidWam(doc: unknown, detail: string): void {
  const result = validateWam(doc);
  if (!result.ok) throw new AppError(422, "invalid-wam", detail, { errors: result.errors });
}
