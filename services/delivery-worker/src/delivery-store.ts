/**
 * The worker's side of the delivery log, shaped for throughput: reads and writes of concurrent
 * jobs are coalesced into one statement each (group commit), so a worker running a hundred
 * deliveries at once makes a handful of round trips per batch instead of several per delivery.
 * Every job still waits for its own write to commit before it completes, so a crash never loses a
 * logged attempt (the job is simply run again: at least once).
 *
 * The statements themselves belong to the DeliveryLog of @vw/db (the one owner of the log); this
 * file only batches. The log runs here over a plain `pg` pool as named prepared statements (parsed
 * and planned once per connection) rather than through Prisma, whose raw queries are compiled
 * again on every call; the profile of `pnpm bench delivery` showed that compilation as the
 * worker's largest cost after HTTP itself.
 */
import { DeliveryLog, pgRunner, type AttemptResult, type DeliveryForAttempt, type PgPool } from "@vw/db";

export type { AttemptResult, DeliveryForAttempt } from "@vw/db";

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

/**
 * Runs `flush` over what was queued while earlier flushes were running, with at most
 * `maxInFlight` flushes at once; callers get their own result back.
 */
class Coalescer<In, Out> {
  private queue: { input: In; waiter: Waiter<Out> }[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly flush: (inputs: In[]) => Promise<Out[]>,
    private readonly maxBatch: number,
    /** Flushes running at once: while one waits on the database, the next batch can be sent. */
    private readonly maxInFlight: number,
  ) {}

  submit(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.queue.push({ input, waiter: { resolve, reject } });
      if (!this.scheduled && this.inFlight < this.maxInFlight) {
        // One tick lets the jobs resolved by the same I/O event join the batch.
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight += 1;
      this.flush(batch.map((b) => b.input))
        .then(
          (outputs) => batch.forEach((b, i) => b.waiter.resolve(outputs[i] as Out)),
          (err: unknown) => batch.forEach((b) => b.waiter.reject(err)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.pump();
        });
    }
  }
}

/** The delivery-worker's reads and writes. */
export class DeliveryStore {
  private readonly log: DeliveryLog;
  private readonly loads: Coalescer<string, DeliveryForAttempt | null>;
  private readonly writes: Coalescer<AttemptResult, number | null>;

  constructor(pool: PgPool) {
    this.log = new DeliveryLog(pgRunner(pool));
    // One statement of each kind at a time: what arrives meanwhile waits for the next one, so the
    // batches grow with the load. With 2 reads and 3 writes in flight, `pnpm bench delivery`
    // measured PostgreSQL at 0.20-0.23 ms of CPU per delivery; with one of each, 0.17-0.18 (bigger
    // group commits), at the same throughput.
    this.loads = new Coalescer((ids) => this.log.loadForAttempt(ids), 500, 1);
    this.writes = new Coalescer((results) => this.writeMany(results), 500, 1);
  }

  /** The delivery with its endpoint's current state, or null when either no longer exists. */
  load(deliveryId: string): Promise<DeliveryForAttempt | null> {
    return this.loads.submit(deliveryId);
  }

  /**
   * Logs an attempt, updates its delivery and the endpoint's failure count, all committed
   * together; resolves with the endpoint's consecutive failures afterwards (null if it was not
   * touched: a test attempt, or an endpoint already at zero that succeeded again).
   */
  record(result: AttemptResult): Promise<number | null> {
    return this.writes.submit(result);
  }

  /** Marks a delivery that will not be sent (its endpoint is disabled) as skipped, if still pending. */
  async markSkipped(delivery: Pick<DeliveryForAttempt, "deliveryId" | "createdAt">): Promise<void> {
    await this.log.markSkipped(delivery.deliveryId, delivery.createdAt);
  }

  private async writeMany(results: AttemptResult[]): Promise<(number | null)[]> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.log.recordAttempts(results);
      } catch (err) {
        // A deadlock or serialization failure aborts the whole statement: nothing was written,
        // so running it again is safe. Anything else is the job's failure (retried by BullMQ).
        if (attempt >= 5 || !isRetryableTransactionError(err)) throw err;
      }
    }
  }
}

/** PostgreSQL deadlock (40P01) or serialization failure (40001). */
function isRetryableTransactionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "40P01" || code === "40001") return true;
  const text = err instanceof Error ? `${err.message} ${JSON.stringify((err as { cause?: unknown }).cause ?? "")}` : "";
  return /deadlock detected|40P01|could not serialize|40001/.test(text);
}
