/**
 * The process's limit of attempts in flight (`DELIVERY_CONCURRENCY`): a counting semaphore, FIFO.
 *
 * A job takes a slot before it asks for its endpoint's window and gives it back as soon as its
 * POST has an answer (or it stops early), not after its attempt is logged. The worker fetches
 * more jobs than it has slots ({@link JOBS_PER_ATTEMPT_SLOT}), so the jobs whose attempts wait
 * for the log's next group commit no longer keep other POSTs from starting, and the commits grow
 * with the load instead of the POSTs shrinking with it.
 */

/** BullMQ jobs a worker holds per attempt slot: one sending, one waiting for its log write. */
export const JOBS_PER_ATTEMPT_SLOT = 2;

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
