/**
 * The worker's side of the delivery log, shaped for throughput: the claims of every drain of the
 * moment go in one statement, and so do the attempts they recorded meanwhile (group commit), so a
 * worker running a hundred attempts at once makes a handful of round trips per batch instead of
 * several per delivery. A drain waits for its attempts' writes to commit before it ends; a crash
 * before that leaves the deliveries claimed, and the next drain after the claims' lease sends them
 * again (at least once).
 *
 * The statements themselves belong to the DeliveryLog of @vw/db (the one owner of the log); this
 * file only batches. The process's log runs over a plain `pg` pool as named prepared statements
 * (parsed and planned once per connection) rather than through Prisma, whose raw queries are
 * compiled again on every call (docs/decisions/0012-one-database-path-per-process.md).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { AttemptApplication, ClaimedDelivery, DeliveryLog } from "@vw/db";
import { Coalescer, isDependencyUnavailable } from "@vw/service-kit";

export type { AttemptApplication, ClaimedDelivery } from "@vw/db";

/** A drain's claim: up to `limit` of its endpoint's due deliveries. */
interface ClaimRequest {
  endpointId: string;
  limit: number;
}

/**
 * How long an attempt's log write waits for PostgreSQL to come back, by default. The POST has
 * already been answered: giving up sends the delivery again later, so a restart (seconds) is
 * waited out and the receiver gets no copy.
 */
export const RECORD_RETRY_MS = 20_000;

/** Options of {@link DeliveryStore}. */
export interface DeliveryStoreOptions {
  /** How long a claim holds its deliveries (no other drain takes them meanwhile). */
  leaseMs: number;
  /** See {@link RECORD_RETRY_MS}. */
  recordRetryMs?: number;
  /** First wait between two tries of a log write; doubled up to 2 s. */
  recordRetryFirstWaitMs?: number;
}

/** The delivery-worker's reads and writes. */
export class DeliveryStore {
  private readonly claims: Coalescer<ClaimRequest, ClaimedDelivery[]>;
  private readonly writes: Coalescer<AttemptApplication, number | undefined>;
  private stopped = false;

  constructor(
    private readonly log: DeliveryLog,
    private readonly options: DeliveryStoreOptions,
  ) {
    // One statement of each kind at a time: what arrives meanwhile waits for the next one, so the
    // batches grow with the load. Several in flight made smaller group commits, which cost
    // PostgreSQL more CPU per delivery at the same throughput in `pnpm bench delivery`
    // (docs/decisions/0001-attempt-log-group-commit.md).
    this.claims = new Coalescer((requests) => this.claimMany(requests), { maxBatch: 200, maxInFlight: 1 });
    this.writes = new Coalescer((applications) => this.writeMany(applications), { maxBatch: 500, maxInFlight: 1 });
  }

  /** Claims up to `limit` of the endpoint's due deliveries (with the claims of the other drains of the moment). */
  claim(endpointId: string, limit: number): Promise<ClaimedDelivery[]> {
    return this.claims.submit({ endpointId, limit });
  }

  /**
   * Logs an attempt and applies its fate to its delivery and the endpoint's failure count, all
   * committed together; resolves with the endpoint's consecutive failures afterwards (undefined
   * when the count did not change).
   */
  async record(application: AttemptApplication): Promise<number | undefined> {
    // PostgreSQL unavailable (a restart, a failover): the attempt was made, so its write is tried
    // again until PostgreSQL answers, for a bounded time and not once the worker is closing; past
    // that the error goes to the job, which runs again later (at least once: a copy).
    const deadline = Date.now() + (this.options.recordRetryMs ?? RECORD_RETRY_MS);
    for (let waitMs = this.options.recordRetryFirstWaitMs ?? 250; ; waitMs = Math.min(2 * waitMs, 2000)) {
      try {
        return await this.writes.submit(application);
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

  /** The deliveries still pending among these become `skipped` (their endpoint is disabled). */
  async skip(deliveries: readonly ClaimedDelivery[]): Promise<void> {
    await this.log.skip(deliveries.map((d) => d.deliveryId));
  }

  /** Gives claims back unattempted (the worker is closing): the next drain takes them at once. */
  async release(deliveries: readonly ClaimedDelivery[]): Promise<void> {
    await this.log.releaseClaims(deliveries);
  }

  /**
   * Renews the claim of a delivery about to be sent whose lease runs short (it waited in its
   * drain behind a throttle or a stalled process): resolves with the renewed delivery, or null when
   * the claim expired and another drain took it (then it is theirs to send, not this drain's).
   */
  async renew(delivery: ClaimedDelivery): Promise<ClaimedDelivery | null> {
    const renewed = (await this.log.renewClaims([delivery], this.options.leaseMs)).get(delivery.deliveryId);
    return renewed === undefined ? null : { ...delivery, ...renewed };
  }

  /** One claim statement for several drains; two requests for one endpoint share its rows' first taker. */
  private async claimMany(requests: ClaimRequest[]): Promise<ClaimedDelivery[][]> {
    const limits = new Map<string, number>();
    for (const r of requests) limits.set(r.endpointId, (limits.get(r.endpointId) ?? 0) + r.limit);
    const rows = await this.log.claim([...limits].map(([endpointId, limit]) => ({ endpointId, limit })), this.options.leaseMs);
    const byEndpoint = new Map<string, ClaimedDelivery[]>();
    for (const row of rows) {
      const list = byEndpoint.get(row.endpointId);
      if (list) list.push(row);
      else byEndpoint.set(row.endpointId, [row]);
    }
    return requests.map((r) => {
      const list = byEndpoint.get(r.endpointId) ?? [];
      byEndpoint.delete(r.endpointId);
      return list;
    });
  }

  private async writeMany(applications: AttemptApplication[]): Promise<(number | undefined)[]> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const failures = await this.log.record(applications);
        return applications.map((a) => failures.get(a.endpointId));
      } catch (err) {
        // An attempt already logged: a write tried again after PostgreSQL went away had committed
        // before the connection dropped. The statement wrote nothing; the others are written on
        // their own, and the one already logged is done (its failure count is not known here).
        if (isUniqueViolation(err)) return applications.length === 1 ? [undefined] : this.writeOneByOne(applications);
        // A deadlock or serialization failure aborts the whole statement: nothing was written,
        // so running it again is safe. Anything else is the job's failure (retried by BullMQ).
        if (attempt >= 5 || !isRetryableTransactionError(err)) throw err;
      }
    }
  }

  private async writeOneByOne(applications: AttemptApplication[]): Promise<(number | undefined)[]> {
    const out: (number | undefined)[] = [];
    for (const application of applications) out.push((await this.writeMany([application]))[0]);
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
