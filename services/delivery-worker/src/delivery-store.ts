/**
 * The worker's side of the delivery log, shaped for throughput: reads and writes of concurrent
 * jobs are coalesced into one statement each (group commit), so a worker running a hundred
 * deliveries at once makes a handful of round trips per batch instead of several per delivery.
 * Every job still waits for its own write to commit before it completes, so a crash never loses a
 * logged attempt (the job is simply run again: at least once).
 *
 * The statements themselves belong to the DeliveryLog of @vw/db (the one owner of the log); this
 * file only batches. The process's log runs over a plain `pg` pool as named prepared statements
 * (parsed and planned once per connection) rather than through Prisma, whose raw queries are
 * compiled again on every call (docs/decisions/0012-one-database-path-per-process.md).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { AttemptResult, DeliveryForAttempt, DeliveryLog } from "@vw/db";
import { Coalescer, isDependencyUnavailable } from "@vw/service-kit";

export type { AttemptResult, DeliveryForAttempt } from "@vw/db";

/**
 * How long an attempt's log write waits for PostgreSQL to come back, by default. The POST has
 * already been answered: giving up sends the delivery again later, so a restart (seconds) is
 * waited out and the receiver gets no copy.
 */
export const RECORD_RETRY_MS = 20_000;

/** Options of {@link DeliveryStore}. */
export interface DeliveryStoreOptions {
  /** See {@link RECORD_RETRY_MS}. */
  recordRetryMs?: number;
  /** First wait between two tries of a log write; doubled up to 2 s. */
  recordRetryFirstWaitMs?: number;
}

/** The delivery-worker's reads and writes. */
export class DeliveryStore {
  private readonly loads: Coalescer<string, DeliveryForAttempt | null>;
  private readonly writes: Coalescer<AttemptResult, number | null>;
  private stopped = false;

  constructor(
    private readonly log: DeliveryLog,
    private readonly options: DeliveryStoreOptions = {},
  ) {
    // One statement of each kind at a time: what arrives meanwhile waits for the next one, so the
    // batches grow with the load. Several in flight made smaller group commits, which cost
    // PostgreSQL more CPU per delivery at the same throughput in `pnpm bench delivery`
    // (docs/decisions/0001-attempt-log-group-commit.md).
    this.loads = new Coalescer((ids) => this.log.loadForAttempt(ids), { maxBatch: 500, maxInFlight: 1 });
    this.writes = new Coalescer((results) => this.writeMany(results), { maxBatch: 500, maxInFlight: 1 });
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
  async record(result: AttemptResult): Promise<number | null> {
    // PostgreSQL unavailable (a restart, a failover): the attempt was made, so its write is tried
    // again until PostgreSQL answers, for a bounded time and not once the worker is closing; past
    // that the error goes to the job, which runs again later (at least once: a copy).
    const deadline = Date.now() + (this.options.recordRetryMs ?? RECORD_RETRY_MS);
    for (let waitMs = this.options.recordRetryFirstWaitMs ?? 250; ; waitMs = Math.min(2 * waitMs, 2000)) {
      try {
        return await this.writes.submit(result);
      } catch (err) {
        if (this.stopped || !isDependencyUnavailable(err) || Date.now() + waitMs > deadline) throw err;
        await sleep(waitMs);
      }
    }
  }

  /** Log writes waiting for PostgreSQL give up at their next try (the worker is closing). */
  stopRetrying(): void {
    this.stopped = true;
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
        // An attempt already logged: a write tried again after PostgreSQL went away had committed
        // before the connection dropped. The statement wrote nothing; the others are written on
        // their own, and the one already logged is done (its failure count is not known here).
        if (isUniqueViolation(err)) return results.length === 1 ? [null] : this.writeOneByOne(results);
        // A deadlock or serialization failure aborts the whole statement: nothing was written,
        // so running it again is safe. Anything else is the job's failure (retried by BullMQ).
        if (attempt >= 5 || !isRetryableTransactionError(err)) throw err;
      }
    }
  }

  private async writeOneByOne(results: AttemptResult[]): Promise<(number | null)[]> {
    const out: (number | null)[] = [];
    for (const result of results) out.push((await this.writeMany([result]))[0] ?? null);
    return out;
  }
}

/** PostgreSQL unique violation (23505): here, an attempt row whose id is already logged. */
function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === "23505";
}

/** PostgreSQL deadlock (40P01) or serialization failure (40001). */
function isRetryableTransactionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "40P01" || code === "40001") return true;
  const text = err instanceof Error ? `${err.message} ${JSON.stringify((err as { cause?: unknown }).cause ?? "")}` : "";
  return /deadlock detected|40P01|could not serialize|40001/.test(text);
}
