import { randomBytes } from "node:crypto";
import type { RedisClient } from "@vw/queues/redis-connection";
import { AppError } from "@vw/service-kit";

// Deletes the lock only if it still holds our token, so a holder whose lease ran out never frees
// the next holder's lock.
const RELEASE = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`;

// Extends the lease only while it still holds our token (a long holder: an upload).
const RENEW = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`;

/** Per-call settings of {@link FileLocks.withLock}, for holders that differ from single-file writes. */
export interface LockCallOptions {
  /** How long to wait for the lock (the instance's `waitMs` otherwise). */
  waitMs?: number;
  /** Keep extending the lease while `fn` runs: for holders that may outlast one lease. */
  renew?: boolean;
  /** The 503's detail when the wait runs out. */
  busyDetail?: string;
}

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
  async withLock<T>(key: string, fn: () => Promise<T>, call: LockCallOptions = {}): Promise<T> {
    const previous = this.local.get(key) ?? Promise.resolve();
    let releaseLocal!: () => void;
    const mine = new Promise<void>((resolve) => (releaseLocal = resolve));
    const tail = previous.then(() => mine);
    this.local.set(key, tail);
    try {
      await previous;
      const token = await this.acquire(key, call.waitMs ?? this.options.waitMs, call.busyDetail);
      const renewal = call.renew ? this.keepRenewing(key, token) : undefined;
      try {
        return await fn();
      } finally {
        if (renewal) clearInterval(renewal);
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

  /**
   * Extends the lease every third of it. A renewal that fails (Redis away) is retried at the next
   * tick; if the lease is lost meanwhile, another holder may start, which for an upload means two
   * writers of one directory: each still writes whole files, and the last one's deletions win.
   */
  private keepRenewing(key: string, token: string): NodeJS.Timeout {
    const timer = setInterval(() => {
      void this.redis.eval(RENEW, 1, this.lockKey(key), token, String(this.options.leaseMs)).catch(() => undefined);
    }, Math.max(50, Math.floor(this.options.leaseMs / 3)));
    timer.unref();
    return timer;
  }

  private async acquire(key: string, waitMs: number, busyDetail = "Another write to this file is in progress; retry shortly."): Promise<string> {
    const token = randomBytes(12).toString("base64url");
    const deadline = Date.now() + waitMs;
    let pause = 2;
    for (;;) {
      const ok = await this.redis.set(this.lockKey(key), token, "PX", this.options.leaseMs, "NX");
      if (ok === "OK") return token;
      if (Date.now() >= deadline) {
        throw new AppError(503, "file-busy", busyDetail, {
          headers: { "Retry-After": "1" },
        });
      }
      await new Promise((r) => setTimeout(r, pause + Math.random() * pause));
      pause = Math.min(pause * 2, 25);
    }
  }
}
