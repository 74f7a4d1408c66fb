/**
 * What the file operations need of a world's storage quota: bytes are reserved before a write
 * that grows the world (refused with 413 `quota-exceeded` past the limit, so nothing is stored)
 * and given back when the write did not happen; what a write or a deletion frees is counted after
 * it. Implemented over PostgreSQL by `StorageUsage` (storage/storage-usage.ts).
 */
import { AppError } from "@vw/service-kit";
import { WriteConflictError } from "../storage/object-store.js";

/** The world a file belongs to (a `FilePath` is one). */
export interface WorldRef {
  organization: string;
  world: string;
}

export interface WorldStorage {
  /** Counts `bytes` (> 0) more for the world, or throws 413 `quota-exceeded` (nothing counted) when that passes its limit. */
  reserve(world: WorldRef, bytes: number): Promise<void>;
  /** Counts `bytes` (negative: fewer) for the world whatever its limit: bytes freed, or a reservation given back. */
  adjust(world: WorldRef, bytes: number): Promise<void>;
}

/** No quota: for callers that count nothing (tools and tests that build the service by hand). */
export const UNCOUNTED_STORAGE: WorldStorage = {
  reserve: async () => undefined,
  adjust: async () => undefined,
};

/**
 * True when a failed write certainly stored nothing: S3 answered with an error, or a conditional
 * write lost its race. A timeout or a cut connection may have stored the bytes, so their
 * reservation is kept (the count errs high, never low).
 */
function certainlyNotWritten(err: unknown): boolean {
  if (err instanceof WriteConflictError || (err instanceof AppError && err.code === "write-conflict")) return true;
  return typeof (err as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode === "number";
}

/**
 * Runs a write that changes the world's stored bytes by `delta`: a growth is reserved first (a
 * refusal stores nothing), a shrink counted once the write succeeded. `write` resolves with null
 * when it stored nothing (a lost conditional write), which gives the reservation back too.
 */
export async function accountedWrite<T>(storage: WorldStorage, world: WorldRef, delta: number, write: () => Promise<T | null>): Promise<T | null> {
  if (delta > 0) await storage.reserve(world, delta);
  let result: T | null;
  try {
    result = await write();
  } catch (err) {
    if (delta > 0 && certainlyNotWritten(err)) await storage.adjust(world, -delta);
    throw err;
  }
  if (result === null) {
    if (delta > 0) await storage.adjust(world, -delta);
  } else if (delta < 0) {
    await storage.adjust(world, delta);
  }
  return result;
}
