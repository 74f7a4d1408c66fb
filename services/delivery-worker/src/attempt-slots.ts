/**
 * The process's limit of attempts in flight (`DELIVERY_CONCURRENCY`): a counting semaphore, FIFO.
 *
 * A drain takes a slot before it starts a POST and gives it back once the attempt is logged (or
 * it stops early). An attempt answered but not yet logged is still in flight: a worker killed then
 * sends it again once its claim's lease ends, so holding the slot until the log's group commit
 * bounds the copies one crash can cause by DELIVERY_CONCURRENCY (test/faults).
 */

/** A counting semaphore handing slots out in the order they were asked for. */
export class AttemptSlots {
  private used = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`AttemptSlots: size must be a positive integer, got ${size}`);
  }

  /** Attempts holding a slot now. */
  get inUse(): number {
    return this.used;
  }

  /** Jobs waiting for a slot now. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Resolves with a release function once a slot is free; the function is idempotent. */
  async take(): Promise<() => void> {
    if (this.used < this.size) this.used += 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter: `used` stays, so no one can jump the queue.
      if (next) next();
      else this.used -= 1;
    };
  }
}
