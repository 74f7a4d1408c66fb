/** A lease on one Redis key, for work one replica at a time does (the reconciler's sweeps). */
import { randomUUID } from "node:crypto";
import type { RedisClient } from "./redis-connection.js";

/**
 * A lease on one key: held by one holder at a time, renewed by its holder, lost when not renewed
 * within its time to live (a holder that died), so another takes over.
 */
export class RedisLease {
  private readonly token = randomUUID();

  constructor(
    private readonly redis: RedisClient,
    readonly key: string,
    private readonly ttlMs: number,
  ) {}

  /** Takes the lease if free, renews it if ours; true while ours. */
  async hold(): Promise<boolean> {
    const held = await this.redis.eval(
      "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end " +
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0",
      1,
      this.key,
      this.token,
      String(this.ttlMs),
    );
    return Number(held) === 1;
  }

  /** Gives the lease up if ours (shutdown), so another holder need not wait for it to expire. */
  async release(): Promise<void> {
    await this.redis.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, this.key, this.token);
  }
}
