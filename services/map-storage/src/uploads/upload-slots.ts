import { AppError } from "@vw/service-kit";

/**
 * At most `max` uploads in progress in this process (MAX_CONCURRENT_UPLOADS), from the spooling
 * of their zip to the end of their writes: what an upload holds (its zip on disk, a `.wam` being
 * checked in memory, files in flight to S3) is then bounded by `max` times one upload's share,
 * whatever number of clients upload at once. Others wait in arrival order, up to `waitMs`, then
 * get 503 `file-busy` with `Retry-After`.
 */
export class UploadSlots {
  private active = 0;
  private readonly waiting: { grant: () => void }[] = [];

  constructor(
    private readonly max: number,
    private readonly waitMs: number,
  ) {}

  /** Runs `fn` once a slot is free. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private acquire(): Promise<void> {
    if (this.active < this.max) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter = { grant: () => (clearTimeout(timer), resolve()) };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(new AppError(503, "file-busy", `This server is publishing ${this.max} uploads already; retry shortly.`, { headers: { "Retry-After": "5" } }));
      }, this.waitMs);
      this.waiting.push(waiter);
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next.grant(); // the slot passes on: `active` stays
    else this.active--;
  }
}
