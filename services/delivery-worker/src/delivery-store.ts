/**
 * The worker's database side, shaped for throughput: reads and writes of concurrent jobs are
 * coalesced into one statement each (group commit), so a worker running a hundred deliveries at
 * once makes a handful of round trips per batch instead of several per delivery. Every job still
 * waits for its own write to commit before it completes, so a crash never loses a logged attempt
 * (the job is simply run again: at least once).
 */
import { Prisma, type PrismaClient } from "@vw/db";
import type { DeliveryStatus } from "@vw/contracts";
import type { AttemptRecord } from "@vw/webhook-core";

/** A delivery and the state of its endpoint, read fresh for each attempt. */
export interface DeliveryForAttempt {
  deliveryId: string;
  endpointId: string;
  body: Buffer;
  status: DeliveryStatus;
  attemptCount: number;
  test: boolean;
  url: string;
  enabled: boolean;
  secretSealed: string | null;
  secretVersion: number;
}

/** What one attempt changes. */
export interface AttemptResult {
  attempt: AttemptRecord;
  endpointId: string;
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  /** Whether the attempt counts towards the endpoint's consecutive failures (ordinary deliveries only). */
  counts: boolean;
  succeeded: boolean;
}

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

/**
 * Runs `flush` over everything queued while the previous flush was running. One flush at a time;
 * callers get their own result back.
 */
class Coalescer<In, Out> {
  private queue: { input: In; waiter: Waiter<Out> }[] = [];
  private running = false;

  constructor(
    private readonly flush: (inputs: In[]) => Promise<Out[]>,
    private readonly maxBatch: number,
  ) {}

  submit(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.queue.push({ input, waiter: { resolve, reject } });
      if (!this.running) setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const outputs = await this.flush(batch.map((b) => b.input));
          batch.forEach((b, i) => b.waiter.resolve(outputs[i] as Out));
        } catch (err) {
          for (const b of batch) b.waiter.reject(err);
        }
      }
    } finally {
      this.running = false;
    }
  }
}

interface DeliveryRow {
  id: string;
  endpoint_id: string;
  body: Uint8Array;
  status: string;
  attempt_count: number;
  test: boolean;
  url: string;
  enabled: boolean;
  secret_sealed: string | null;
  secret_version: number;
}

interface CounterRow {
  id: string;
  consecutive_failures: number;
}

/** The delivery-worker's reads and writes. */
export class DeliveryStore {
  private readonly loads: Coalescer<string, DeliveryForAttempt | null>;
  private readonly writes: Coalescer<AttemptResult, number | null>;

  constructor(private readonly prisma: PrismaClient) {
    this.loads = new Coalescer((ids) => this.loadMany(ids), 500);
    this.writes = new Coalescer((results) => this.writeMany(results), 500);
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
  async markSkipped(deliveryId: string): Promise<void> {
    await this.prisma.$executeRaw`
      UPDATE webhook_deliveries SET status = 'skipped', next_attempt_at = NULL, updated_at = now()
      WHERE id = ${deliveryId}::uuid AND status = 'pending'`;
  }

  private async loadMany(ids: string[]): Promise<(DeliveryForAttempt | null)[]> {
    const rows = await this.prisma.$queryRaw<DeliveryRow[]>`
      SELECT d.id, d.endpoint_id, d.body, d.status, d.attempt_count, d.test,
             e.url, e.enabled, e.secret_sealed, e.secret_version
      FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
      WHERE d.id = ANY(${ids}::uuid[])`;
    const byId = new Map(rows.map((row) => [row.id, row]));
    return ids.map((id) => {
      const row = byId.get(id);
      if (!row) return null;
      return {
        deliveryId: row.id,
        endpointId: row.endpoint_id,
        body: Buffer.from(row.body),
        status: row.status as DeliveryStatus,
        attemptCount: row.attempt_count,
        test: row.test,
        url: row.url,
        enabled: row.enabled,
        secretSealed: row.secret_sealed,
        secretVersion: row.secret_version,
      };
    });
  }

  private async writeMany(results: AttemptResult[]): Promise<(number | null)[]> {
    const counters = failureCounterChanges(results);
    const counterIds = [...counters.keys()];
    // A delivery skipped while its attempt was in flight (the endpoint was disabled) stays
    // skipped: its retry must not be sent, even if the endpoint is re-enabled (no catch-up).
    // Lock order, shared with every disable (admin-api and EndpointDisabler): endpoint rows
    // first, sorted by id, then deliveries. Any other order deadlocks against a disable that
    // updates the endpoint and then its waiting deliveries.
    counterIds.sort();
    const [, counterRows] = await this.prisma.$transaction([
      this.prisma.$queryRaw`
        SELECT id FROM webhook_endpoints WHERE id = ANY(${counterIds}::uuid[]) ORDER BY id FOR NO KEY UPDATE`,
      this.prisma.$queryRaw<CounterRow[]>`
        UPDATE webhook_endpoints e
        SET consecutive_failures = CASE WHEN v.reset THEN v.n ELSE e.consecutive_failures + v.n END
        FROM unnest(${counterIds}::uuid[], ${counterIds.map((id) => counters.get(id)!.reset)}::bool[],
                    ${counterIds.map((id) => counters.get(id)!.n)}::int[]) AS v(id, reset, n)
        WHERE e.id = v.id AND (v.n > 0 OR e.consecutive_failures <> 0)
        RETURNING e.id, e.consecutive_failures`,
      this.prisma.deliveryAttempt.createMany({
        data: results.map(({ attempt }) => ({
          ...attempt,
          requestHeaders: attempt.requestHeaders,
          responseHeaders: attempt.responseHeaders ?? Prisma.DbNull,
        })),
      }),
      this.prisma.$executeRaw`
        UPDATE webhook_deliveries d
        SET status = CASE WHEN d.status = 'skipped' AND v.status = 'pending' THEN 'skipped' ELSE v.status END,
            attempt_count = d.attempt_count + 1, last_status = v.last_status,
            next_attempt_at = CASE WHEN d.status = 'skipped' THEN NULL ELSE v.next_at END, updated_at = now()
        FROM unnest(${results.map((r) => r.attempt.deliveryId)}::uuid[], ${results.map((r) => r.status)}::text[],
                    ${results.map((r) => r.attempt.responseStatus)}::int[], ${results.map((r) => r.nextAttemptAt)}::timestamptz[])
             AS v(id, status, last_status, next_at)
        WHERE d.id = v.id`,
    ]);
    const failuresById = new Map(counterRows.map((row) => [row.id, row.consecutive_failures]));
    return results.map((r) => (r.counts ? (failuresById.get(r.endpointId) ?? null) : null));
  }
}

/**
 * Per endpoint, how a batch of attempts (in completion order) moves the consecutive-failure
 * count: after a success it restarts from the failures that followed it (`reset`), otherwise
 * every failure adds one.
 */
export function failureCounterChanges(results: readonly AttemptResult[]): Map<string, { reset: boolean; n: number }> {
  const changes = new Map<string, { reset: boolean; n: number }>();
  for (const result of results) {
    if (!result.counts) continue;
    const change = changes.get(result.endpointId) ?? { reset: false, n: 0 };
    if (result.succeeded) {
      change.reset = true;
      change.n = 0;
    } else {
      change.n += 1;
    }
    changes.set(result.endpointId, change);
  }
  return changes;
}
