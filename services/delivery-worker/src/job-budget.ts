/**
 * One budget of jobs in hand for the whole process, shared by the BullMQ workers of every delivery
 * shard (delivery-shards.ts). Each shard's worker may use all of it (one busy shard gets the whole
 * process), but together they never hold more jobs than the budget: `DELIVERY_CONCURRENCY` means
 * the same with 16 shards as with one, instead of sixteen times as much.
 *
 * BullMQ's worker has no such hook, so {@link shareJobBudget} wraps two of its methods on the
 * instance (kept small and tested: job-budget.int.test.ts):
 * - the fetch of a job (`_getNextJob`) takes a permit first (synchronously when one is free, so
 *   BullMQ's fetch starts as it would without the budget). With none free it waits only when
 *   this worker holds no fetched job that has not started (that job's permit could be the one
 *   awaited); otherwise it comes back empty, so BullMQ starts what it holds, and asks again when
 *   one of its jobs ends. While it blocks on an empty shard it holds no permit;
 * - a job's processing (`processJob`) gives its permit back when it ends, unless BullMQ fetched
 *   the next job in the same call (then the permit passes to that job). It fetches the next job
 *   so only while this worker holds about its share of the budget or less, or nobody else waits:
 *   otherwise a shard that took the whole budget first would keep it until it ran dry, its few
 *   endpoints' windows would hold a fraction of the jobs it holds (the rest parked), and the
 *   other shards would wait.
 */
import type { Job, Worker } from "bullmq";

/**
 * A counting semaphore of jobs in hand, FIFO, whose waits can be abandoned, that knows which owner
 * (a shard's worker) holds each permit: an owner holding more than its fair share while another
 * waits gives its permit back instead of passing it to a next job of its own ({@link shouldYield}).
 */
export class JobBudget {
  private used = 0;
  private readonly waiting: { owner: object; grant: () => void }[] = [];
  private readonly held = new Map<object, number>();

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`JobBudget: size must be a positive integer, got ${size}`);
  }

  /** Jobs held now. */
  get inUse(): number {
    return this.used;
  }

  /** Permits `owner` holds now. */
  heldBy(owner: object): number {
    return this.held.get(owner) ?? 0;
  }

  /** Whether `owner` waits for a permit now. */
  isWaiting(owner: object): boolean {
    return this.waiting.some((w) => w.owner === owner);
  }

  /** Takes a permit for `owner` if one is free. */
  tryTake(owner: object): boolean {
    if (this.used >= this.size) return false;
    this.used += 1;
    this.count(owner, 1);
    return true;
  }

  /** Resolves true with a permit for `owner`, or false when `ms` passed first (nothing taken then). */
  take(owner: object, ms: number): Promise<boolean> {
    if (this.tryTake(owner)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const waiter = {
        owner,
        grant: () => {
          clearTimeout(timer);
          this.count(owner, 1);
          resolve(true);
        },
      };
      const timer = setTimeout(() => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve(false);
      }, ms);
      timer.unref();
      this.waiting.push(waiter);
    });
  }

  /** Takes a permit for `owner` even past the budget (a worker closing must not wait for one). */
  takeAnyway(owner: object): void {
    this.used += 1;
    this.count(owner, 1);
  }

  /** Gives a permit of `owner` back; it passes straight to the oldest waiter, if any. */
  release(owner: object): void {
    this.count(owner, -1);
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.used = Math.max(0, this.used - 1);
  }

  /**
   * Whether `owner` should give a permit back rather than keep it for another job of its own:
   * another owner waits for one, and `owner` holds more than an equal share of the budget among
   * the owners that want jobs (those holding permits or waiting for one), by a margin (a quarter
   * of the share, at least two). One busy owner alone keeps the whole budget; several end up
   * near equal shares. The margin spares the permits' back and forth around the share: each
   * move costs the receiving shard a fetch of its own instead of BullMQ's fetch-next.
   */
  shouldYield(owner: object): boolean {
    if (!this.waiting.some((w) => w.owner !== owner)) return false;
    const wanting = new Set<object>(this.held.keys());
    for (const w of this.waiting) wanting.add(w.owner);
    const share = Math.ceil(this.size / wanting.size);
    return this.heldBy(owner) > share + Math.max(2, Math.ceil(share / 4));
  }

  private count(owner: object, delta: number): void {
    const n = (this.held.get(owner) ?? 0) + delta;
    if (n > 0) this.held.set(owner, n);
    else this.held.delete(owner);
  }
}

/** How often a fetch waiting for a permit looks again at whether its worker got a job to start meanwhile. */
const PERMIT_RECHECK_MS = 50;

/** The BullMQ worker internals {@link shareJobBudget} wraps (BullMQ 6's `Worker`). */
interface WorkerInternals {
  _getNextJob(token: string, opts?: { block?: boolean }): Promise<Job | undefined>;
  waitForJob(blockUntil: number): Promise<number>;
  processJob(job: Job, token: string, fetchNextCallback?: () => boolean): Promise<void | Job>;
  mainLoopQueue: { numQueued(): number } | null;
}

/** Makes `worker` take and give back permits of `budget` for every job it holds (see the file comment). */
export function shareJobBudget(worker: Worker, budget: JobBudget): void {
  const internals = worker as unknown as WorkerInternals;
  const getNextJob = internals._getNextJob.bind(worker);
  const waitForJob = internals.waitForJob.bind(worker);
  const processJob = internals.processJob.bind(worker);
  const holdsUnstarted = () => (internals.mainLoopQueue?.numQueued() ?? 0) > 0;

  /** A permit, waited for only while this worker holds no fetched job that has not started. */
  const permit = async (): Promise<boolean> => {
    while (!budget.tryTake(worker)) {
      if (holdsUnstarted() || worker.closing !== undefined) return false;
      if (await budget.take(worker, PERMIT_RECHECK_MS)) return true;
    }
    return true;
  };

  /** Gives the permit back when the fetch brought no job. */
  const keepIfJob = async (fetching: Promise<Job | undefined>): Promise<Job | undefined> => {
    let job: Job | undefined;
    try {
      job = await fetching;
    } finally {
      if (job === undefined) budget.release(worker);
    }
    return job;
  };
  // With a permit free, BullMQ's fetch starts synchronously, as without the budget: its main loop
  // reads the `waiting` flag the fetch sets before its first await, and starts the jobs it holds
  // instead of waiting on a blocking read behind them.
  internals._getNextJob = (token, opts) => {
    if (budget.tryTake(worker)) return keepIfJob(getNextJob(token, opts));
    return permit().then((ok) => (ok ? keepIfJob(getNextJob(token, opts)) : undefined));
  };
  // Blocking on an empty shard holds no permit: given back for the wait, taken again after it.
  internals.waitForJob = async (blockUntil) => {
    budget.release(worker);
    try {
      return await waitForJob(blockUntil);
    } finally {
      // Only the permit of this fetch is awaited: nothing this worker holds waits for it.
      while (!(await budget.take(worker, PERMIT_RECHECK_MS))) {
        if (worker.closing !== undefined) {
          budget.takeAnyway(worker);
          break;
        }
      }
    }
  };
  internals.processJob = async (job, token, fetchNextCallback) => {
    let next: void | Job = undefined;
    try {
      // The next job comes in the same call only while this worker keeps within its share; past
      // it, the permit goes back to the budget and on to another shard's waiting fetch.
      next = await processJob(job, token, () => (fetchNextCallback?.() ?? true) && !budget.shouldYield(worker));
    } finally {
      if (!next) budget.release(worker);
    }
    return next;
  };
}
