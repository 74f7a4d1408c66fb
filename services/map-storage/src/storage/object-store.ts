import type { Readable } from "node:stream";

/** A stored file as read from the bucket. */
export interface StoredObject {
  body: Buffer;
  /** Strong entity tag, quoted as HTTP and S3 write it: `"<hex>"`. */
  etag: string;
  contentType: string;
}

export interface ObjectHead {
  etag: string;
  contentType: string;
  size: number;
}

/** An object being read: its metadata, and its bytes as a stream (read it or destroy it). */
export interface OpenedObject extends ObjectHead {
  body: Readable;
}

/** The object is larger than the reader would hold in memory; nothing more of it was read. */
export class ObjectTooLargeError extends Error {
  constructor(
    readonly key: string,
    readonly size: number,
  ) {
    super(`${key} is ${size} bytes, more than the reader would hold`);
    this.name = "ObjectTooLargeError";
  }
}

/** Conditions a backend applies when it supports conditional writes (AWS S3, MinIO, R2). */
export interface WriteCondition {
  ifMatch?: string;
  ifNoneMatch?: "*";
}

/** The backend refused a conditional write: someone else changed the object meanwhile. */
export class WriteConflictError extends Error {
  constructor(readonly key: string) {
    super(`conditional write on ${key} lost a race`);
    this.name = "WriteConflictError";
  }
}

/** One page of a listing: keys in lexicographic (UTF-8 byte) order, as S3 lists them. */
export interface ObjectPage {
  keys: { key: string; size: number }[];
  /** True when more keys follow the last one of this page. */
  truncated: boolean;
}

/** The storage operations map-storage needs; implemented over S3 by `S3ObjectStore`. */
export interface ObjectStore {
  /** The whole object in memory; {@link ObjectTooLargeError} (before reading its body) when it is larger than `maxBytes`. */
  get(key: string, maxBytes?: number): Promise<StoredObject | null>;
  /** The object's metadata and a stream of its bytes (large files are streamed to clients), or null when absent. */
  open(key: string): Promise<OpenedObject | null>;
  /** The object's bytes as a stream (downloads), or null when absent. */
  getStream(key: string): Promise<Readable | null>;
  head(key: string): Promise<ObjectHead | null>;
  put(key: string, body: Buffer, contentType: string, condition?: WriteCondition): Promise<{ etag: string }>;
  /** An unconditional write of exactly `length` bytes read from `body` (large files of an upload). */
  putStream(key: string, body: Readable, length: number, contentType: string): Promise<{ etag: string }>;
  /** Keys starting with `prefix`, after `startAfter` when given, at most `max` (S3 caps a page at 1000). */
  list(prefix: string, startAfter: string | undefined, max: number): Promise<ObjectPage>;
  delete(key: string): Promise<void>;
  ping(): Promise<void>;
}
