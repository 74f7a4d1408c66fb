/** A stored file as read from the bucket. */
export interface StoredObject {
  body: Buffer;
  /** Strong entity tag, quoted as HTTP and S3 write it: `"<hex>"`. */
  etag: string;
  contentType: string;
  lastModified: Date | undefined;
}

export interface ObjectHead {
  etag: string;
  contentType: string;
  size: number;
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

/** The storage operations map-storage needs; implemented over S3 by `S3ObjectStore`. */
export interface ObjectStore {
  get(key: string): Promise<StoredObject | null>;
  head(key: string): Promise<ObjectHead | null>;
  put(key: string, body: Buffer, contentType: string, condition?: WriteCondition): Promise<{ etag: string }>;
  delete(key: string): Promise<void>;
  ping(): Promise<void>;
}
