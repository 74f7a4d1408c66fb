/**
 * Bytes of work in progress in this process, shared by every request that draws on it: a caller
 * takes its share before the work and gives it back after, and waits, in arrival order, while the
 * budget is spent. What the work holds in memory at once is then bounded by the budget, however
 * many requests run it together. A share larger than the whole budget takes the whole budget.
 */
export class ByteBudget {
  private used = 0;
  private readonly waiting: { bytes: number; grant: () => void }[] = [];

  constructor(readonly capacity: number) {}

  /** Runs `fn` once `bytes` of the budget are free. */
  async run<T>(bytes: number, fn: () => Promise<T>): Promise<T> {
    const share = Math.min(Math.max(1, bytes), this.capacity);
    await this.take(share);
    try {
      return await fn();
    } finally {
      this.give(share);
    }
  }

  private take(bytes: number): Promise<void> {
    // Nobody overtakes a waiter, so a large share is not starved by small ones.
    if (this.waiting.length === 0 && this.used + bytes <= this.capacity) {
      this.used += bytes;
      return Promise.resolve();
    }
    return new Promise<void>((grant) => this.waiting.push({ bytes, grant }));
  }

  private give(bytes: number): void {
    this.used -= bytes;
    while (this.waiting.length > 0 && this.used + this.waiting[0]!.bytes <= this.capacity) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.grant();
    }
  }
}
