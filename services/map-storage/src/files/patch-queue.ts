/**
 * Group commit of JSON Patches: patches of one file waiting in this instance are applied in
 * arrival order, each atomically and on its own (one that fails is refused alone and changes
 * nothing), then written in one S3 PUT under the file's lock. A conditional patch (If-Match) heads
 * a group of its own, so it is checked against a stored ETag, never an intermediate state.
 */
import { MAX_JSON_DEPTH, checkJsonValue, validateWam } from "@vw/contracts";
import { AppError } from "@vw/service-kit";
import type { Operation } from "fast-json-patch";
import type { CachedFile } from "../storage/file-cache.js";
import type { FileLocks } from "../storage/redis-lock.js";
import type { FilePath } from "./file-path.js";
import { applyPatchBounded } from "./json-patch.js";
import { checkWriteConditions, type WriteConditions } from "./preconditions.js";
import { accountedWrite, type WorldStorage } from "./world-storage.js";

export interface WriteResult {
  created: boolean;
  etag: string;
}

interface PendingPatch {
  ops: Operation[];
  conditions: WriteConditions;
  resolve: (r: WriteResult) => void;
  reject: (err: unknown) => void;
}

/** What the queue needs of the files service: reading under the lock and writing. */
export interface PatchTarget {
  locks: FileLocks;
  storage: WorldStorage;
  /** The current content under the lock (refuses a stored file too large or too deep to patch). */
  readForWrite(fp: FilePath): Promise<CachedFile>;
  /** Writes under the lock; the new ETag, or null when a conditional write lost a race. */
  write(key: string, body: Buffer, contentType: string, cond: { ifMatch: string }, attempt: number): Promise<string | null>;
  /** Largest result (MAX_JSON_FILE_BYTES, or MAX_FILE_BYTES when smaller). */
  maxResultBytes: number;
  /** Most patches of one file committed in one S3 write. */
  maxPatchGroup: number;
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

/** Patches of each file waiting in this instance, committed group by group. */
export class PatchQueue {
  private readonly queues = new Map<string, PendingPatch[]>();

  constructor(private readonly target: PatchTarget) {}

  /** Queues a patch of `fp`; settles once its group is committed (or it is refused). */
  submit(fp: FilePath, ops: Operation[], conditions: WriteConditions): Promise<WriteResult> {
    return new Promise<WriteResult>((resolve, reject) => {
      const item: PendingPatch = { ops, conditions, resolve, reject };
      const queue = this.queues.get(fp.objectKey);
      if (queue) {
        queue.push(item);
        return;
      }
      const fresh = [item];
      this.queues.set(fp.objectKey, fresh);
      void this.drain(fp, fresh);
    });
  }

  private async drain(fp: FilePath, queue: PendingPatch[]): Promise<void> {
    const key = fp.objectKey;
    try {
      await this.target.locks.withLock(key, async () => {
        for (;;) {
          // Deleted synchronously when empty, so a patch arriving later starts a new drain.
          if (queue.length === 0) {
            this.queues.delete(key);
            return;
          }
          const batch = takeGroup(queue, this.target.maxPatchGroup);
          try {
            await this.commitGroup(fp, batch);
          } catch (err) {
            for (const item of batch) item.reject(err);
          }
        }
      });
    } catch (err) {
      // The lock could not be had: everything still waiting fails the same way.
      if (this.queues.get(key) === queue) this.queues.delete(key);
      for (const item of queue.splice(0)) item.reject(err);
    }
  }

  /** Applies a group under the lock and writes it once; settles every item of the group. */
  private async commitGroup(fp: FilePath, group: PendingPatch[]): Promise<void> {
    const bounds = { maxBytes: this.target.maxResultBytes, maxDepth: MAX_JSON_DEPTH };
    let pending = group;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const current = await this.target.readForWrite(fp);
      let doc: unknown;
      try {
        doc = JSON.parse(current.body.toString("utf8"));
      } catch {
        throw new AppError(409, "not-json", `The stored content of '${fp.path}' is not JSON, so a JSON Patch cannot apply to it.`);
      }
      // An upper bound of the document's serialized size, carried from patch to patch.
      let size = { bytes: current.body.length, inflated: false };
      const applied: PendingPatch[] = [];
      for (const item of pending) {
        try {
          checkWriteConditions(current.etag, item.conditions);
          const next = await applyPatchBounded(doc, size, item.ops, bounds);
          assertWithinJsonRules(next.doc);
          if (fp.extension === "wam") assertValidWam(next.doc);
          doc = next.doc;
          size = { bytes: next.bytes, inflated: next.inflated };
          applied.push(item);
        } catch (err) {
          item.reject(err);
        }
      }
      if (applied.length === 0) return;
      const body = Buffer.from(JSON.stringify(doc), "utf8");
      const delta = body.length - current.body.length;
      let etag: string | null;
      try {
        if (body.length > bounds.maxBytes) throw resultTooLarge(body.length, bounds.maxBytes);
        etag = await accountedWrite(this.target.storage, fp, delta, () => this.target.write(fp.objectKey, body, current.contentType, { ifMatch: current.etag }, attempt));
      } catch (err) {
        // Rare: find which patch crosses a limit (the size, the world's quota) by committing them one by one.
        if (applied.length > 1 && err instanceof AppError && err.status === 413) {
          for (const item of applied) await this.commitGroup(fp, [item]).catch((e: unknown) => item.reject(e));
          return;
        }
        throw err;
      }
      if (etag) {
        for (const item of applied) item.resolve({ created: false, etag });
        return;
      }
      pending = applied; // lost a conditional-write race: re-read and re-apply
    }
  }
}

function resultTooLarge(bytes: number, limit: number): AppError {
  return new AppError(413, "payload-too-large", `The patched file would be ${bytes} bytes; the limit is ${limit}.`, { limit });
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

/** A WAM document, or 422 pointing at each invalid field. */
export function assertValidWam(doc: unknown, detail = "The patched file would not be a valid WAM file; nothing was changed."): void {
  const result = validateWam(doc);
  if (!result.ok) throw new AppError(422, "invalid-wam", detail, { errors: result.errors });
}
