import type { RedisClient } from "@vw/queues/redis-connection";
import { LRUCache } from "lru-cache";

/** Version marker values besides an ETag. */
const WRITING = "writing";
const DELETED = "deleted";

/** What Redis says of a file's current version. */
export type VersionState =
  | { kind: "etag"; etag: string }
  | { kind: "deleted" }
  | { kind: "writing" }
  | { kind: "unknown" };

export interface CachedFile {
  body: Buffer;
  etag: string;
  contentType: string;
}

export interface FileCacheOptions {
  maxBytes: number;
  maxEntryBytes: number;
  /** How long a version marker lives in Redis without a write refreshing it. */
  versionTtlSeconds: number;
}

/**
 * Hot files in memory, kept coherent across instances by a version marker per file in Redis.
 *
 * Writers (holding the file lock) set the marker to `writing` before touching S3 and to the new ETag
 * (or `deleted`) after; readers check the marker on every GET (one Redis round trip) and serve the
 * in-memory bytes only when their ETag equals it. A reader that finds no marker reads S3 and offers
 * its ETag with SET NX, which can never overwrite a writer's marker. So a write is visible to every
 * instance as soon as the writer answers, and a lost Redis write degrades to S3 reads, never to
 * stale content.
 */
export class FileCache {
  private readonly memory: LRUCache<string, CachedFile>;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly options: FileCacheOptions,
  ) {
    this.memory = new LRUCache<string, CachedFile>({
      maxSize: options.maxBytes,
      maxEntrySize: options.maxEntryBytes,
      sizeCalculation: (v) => v.body.length + 256,
    });
  }

  private versionKey(key: string): string {
    return `${this.prefix}ver:${key}`;
  }

  /** Current version per Redis; `unknown` when there is no marker or Redis does not answer. */
  async version(key: string): Promise<VersionState> {
    let v: string | null;
    try {
      v = await this.redis.get(this.versionKey(key));
    } catch {
      return { kind: "unknown" };
    }
    if (v === null) return { kind: "unknown" };
    if (v === WRITING) return { kind: "writing" };
    if (v === DELETED) return { kind: "deleted" };
    return { kind: "etag", etag: v };
  }

  /** The in-memory copy, only if it is exactly `etag`. */
  cached(key: string, etag: string): CachedFile | undefined {
    const hit = this.memory.get(key);
    return hit && hit.etag === etag ? hit : undefined;
  }

  /** After a read from S3 with no marker in Redis: offer the version read, and keep it if it stands. */
  async offer(key: string, file: CachedFile): Promise<void> {
    try {
      const set = await this.redis.set(this.versionKey(key), file.etag, "EX", this.options.versionTtlSeconds, "NX");
      if (set === "OK") this.memory.set(key, file);
    } catch {
      // Redis unavailable: serve without caching.
    }
  }

  /** After a read from S3 that matched the marker: keep it in memory. */
  remember(key: string, file: CachedFile): void {
    this.memory.set(key, file);
  }

  /** Writer, before the S3 write: readers bypass the cache until {@link committed}. */
  async writing(key: string): Promise<void> {
    this.memory.delete(key);
    await this.redis.set(this.versionKey(key), WRITING, "EX", 60);
  }

  /** Writer, after the S3 write succeeded. */
  async committed(key: string, file: CachedFile | null): Promise<void> {
    if (file) {
      await this.redis.set(this.versionKey(key), file.etag, "EX", this.options.versionTtlSeconds);
      this.memory.set(key, file);
    } else {
      await this.redis.set(this.versionKey(key), DELETED, "EX", this.options.versionTtlSeconds);
      this.memory.delete(key);
    }
  }

  /** Writer, after an S3 write too large to keep in memory: readers fetch it from S3 and see its ETag. */
  async committedVersion(key: string, etag: string): Promise<void> {
    this.memory.delete(key);
    await this.redis.set(this.versionKey(key), etag, "EX", this.options.versionTtlSeconds);
  }

  /** Writer, after a failed S3 write whose outcome is unknown: drop the marker so readers go to S3. */
  async abandoned(key: string): Promise<void> {
    this.memory.delete(key);
    await this.redis.del(this.versionKey(key)).catch(() => undefined);
  }
}
