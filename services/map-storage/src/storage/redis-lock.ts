import { randomBytes } from "node:crypto";
import type { RedisClient } from "@vw/queues/redis-connection";
import { AppError } from "@vw/service-kit";

// Deletes the lock only if it still holds our token, so a holder whose lease ran out never frees
// the next holder's lock.
const RELEASE = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`;

export interface LockOptions {
  /** Lease: the lock frees itself this long after a holder dies. */
  leaseMs: number;
  /** How long a writer waits for the lock before answering 503. */
  waitMs: number;
}

/**
 * One writer per file across every map-storage instance: a Redis lease (SET NX PX) per object key,
 * plus an in-process queue so an instance sends one contender per file to Redis, not one per request.
 * The lease is the cross-instance guarantee; S3 conditional writes are a second guard on backends
 * that honour them, for a holder that outlives its lease.
 */
export class FileLocks {
  private readonly local = new Map<string, Promise<void>>();

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly options: LockOptions,
  ) {}

  /** Runs `fn` while holding the lock of `key`. */
  async withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.local.get(key) ?? Promise.resolve();
    let releaseLocal!: () => void;
    const mine = new Promise<void>((resolve) => (releaseLocal = resolve));
    const tail = previous.then(() => mine);
    this.local.set(key, tail);
    try {
      await previous;
      const token = await this.acquire(key);
      try {
        return await fn();
      } finally {
        await this.redis.eval(RELEASE, 1, this.lockKey(key), token).catch(() => undefined);
      }
    } finally {
      releaseLocal();
      if (this.local.get(key) === tail) this.local.delete(key);
    }
  }

  private lockKey(key: string): string {
    return `${this.prefix}lock:${key}`;
  }

  private async acquire(key: string): Promise<string> {
    const token = randomBytes(12).toString("base64url");
    const deadline = Date.now() + this.options.waitMs;
    let pause = 2;
    for (;;) {
      const ok = await this.redis.set(this.lockKey(key), token, "PX", this.options.leaseMs, "NX");
      if (ok === "OK") return token;
      if (Date.now() >= deadline) {
        throw new AppError(503, "file-busy", "Another write to this file is in progress; retry shortly.", {
          headers: { "Retry-After": "1" },
        });
      }
      await new Promise((r) => setTimeout(r, pause + Math.random() * pause));
      pause = Math.min(pause * 2, 25);
    }
  }
}
