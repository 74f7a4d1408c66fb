/**
 * The worker's database side, shaped for throughput: reads and writes of concurrent jobs are
 * coalesced into one statement each (group commit), so a worker running a hundred deliveries at
 * once makes a handful of round trips per batch instead of several per delivery. Every job still
 * waits for its own write to commit before it completes, so a crash never loses a logged attempt
 * (the job is simply run again: at least once).
 *
 * These statements run on every attempt, so they go through a plain `pg` pool as named prepared
 * statements (parsed and planned once per connection) rather than through Prisma, whose raw
 * queries are compiled again on every call; the profile of `pnpm bench delivery` showed that
 * compilation as the worker's largest cost after HTTP itself.
 */
import type { PgPool } from "@vw/db";
import type { DeliveryStatus } from "@vw/contracts";
import { attemptColumnArrays, type AttemptRecord } from "@vw/webhook-core";

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
  /** The endpoint's throttle (deliveries started per second), null for none. */
  rateLimitPerSecond: number | null;
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

const LOAD_SQL = `
  SELECT d.id, d.endpoint_id, d.body, d.status, d.attempt_count, d.test,
         e.url, e.enabled, e.secret_sealed, e.rate_limit_per_second
  FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
  WHERE d.id = ANY($1::uuid[])`;

const MARK_SKIPPED_SQL = `
  UPDATE webhook_deliveries SET status = 'skipped', next_attempt_at = NULL, updated_at = now()
  WHERE id = $1::uuid AND status = 'pending'`;

/** See {@link DeliveryStore.writeOnce}; $1..$3 the endpoint counters, $4..$17 the attempts, $18..$19 the deliveries. */
const RECORD_SQL = `
  WITH locked AS (
    SELECT id FROM webhook_endpoints WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE
  ), counters AS (
    UPDATE webhook_endpoints e
    SET consecutive_failures = CASE WHEN v.reset THEN v.n ELSE e.consecutive_failures + v.n END
    FROM unnest($1::uuid[], $2::bool[], $3::int[]) AS v(id, reset, n)
    WHERE e.id = v.id AND e.id IN (SELECT id FROM locked) AND (v.n > 0 OR e.consecutive_failures <> 0)
    RETURNING e.id, e.consecutive_failures
  ), inserted AS (
    INSERT INTO delivery_attempts (id, delivery_id, attempt_number, trigger, started_at, request_headers,
      response_status, response_headers, response_body, response_body_truncated, duration_ms, error_kind, error, verdict)
    SELECT id, delivery_id, attempt_number, trigger, started_at, request_headers::jsonb, response_status,
           response_headers::jsonb, response_body, response_body_truncated, duration_ms, error_kind, error, verdict
    FROM unnest($4::uuid[], $5::uuid[], $6::int[], $7::text[], $8::timestamptz[], $9::text[], $10::int[], $11::text[],
                $12::text[], $13::bool[], $14::int[], $15::text[], $16::text[], $17::text[])
         AS t(id, delivery_id, attempt_number, trigger, started_at, request_headers, response_status, response_headers,
              response_body, response_body_truncated, duration_ms, error_kind, error, verdict)
  ), upd AS (
    UPDATE webhook_deliveries d
    SET status = CASE WHEN d.status = 'skipped' AND v.status = 'pending' THEN 'skipped' ELSE v.status END,
        attempt_count = d.attempt_count + 1, last_status = v.last_status,
        next_attempt_at = CASE WHEN d.status = 'skipped' THEN NULL ELSE v.next_at END, updated_at = now()
    FROM unnest($5::uuid[], $18::text[], $10::int[], $19::timestamptz[]) AS v(id, status, last_status, next_at)
    WHERE d.id = v.id AND (SELECT count(*) FROM counters) >= 0
  )
  SELECT id, consecutive_failures FROM counters`;

interface DeliveryRow {
  id: string;
  endpoint_id: string;
  body: Buffer;
  status: string;
  attempt_count: number;
  test: boolean;
  url: string;
  enabled: boolean;
  secret_sealed: string | null;
  rate_limit_per_second: number | null;
}

interface CounterRow {
  id: string;
  consecutive_failures: number;
}

/** The delivery-worker's reads and writes. */
export class DeliveryStore {
  private readonly loads: Coalescer<string, DeliveryForAttempt | null>;
  private readonly writes: Coalescer<AttemptResult, number | null>;

  constructor(private readonly pool: PgPool) {
    this.loads = new Coalescer((ids) => this.loadMany(ids), 500, 2);
    this.writes = new Coalescer((results) => this.writeMany(results), 500, 3);
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
    await this.pool.query({ name: "dw-mark-skipped", text: MARK_SKIPPED_SQL, values: [deliveryId] });
  }

  private async loadMany(ids: string[]): Promise<(DeliveryForAttempt | null)[]> {
    const { rows } = await this.pool.query<DeliveryRow>({ name: "dw-load", text: LOAD_SQL, values: [ids] });
    const byId = new Map(rows.map((row) => [row.id, row]));
    return ids.map((id) => {
      const row = byId.get(id);
      if (!row) return null;
      return {
        deliveryId: row.id,
        endpointId: row.endpoint_id,
        body: row.body,
        status: row.status as DeliveryStatus,
        attemptCount: row.attempt_count,
        test: row.test,
        url: row.url,
        enabled: row.enabled,
        secretSealed: row.secret_sealed,
        rateLimitPerSecond: row.rate_limit_per_second,
      };
    });
  }

  private async writeMany(results: AttemptResult[]): Promise<(number | null)[]> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.writeOnce(results);
      } catch (err) {
        // A deadlock or serialization failure aborts the whole statement: nothing was written,
        // so running it again is safe. Anything else is the job's failure (retried by BullMQ).
        if (attempt >= 5 || !isRetryableTransactionError(err)) throw err;
      }
    }
  }

  /**
   * One statement, so one round trip and one implicit transaction, however many attempts it
   * logs. Lock order, shared with every disable (admin-api and EndpointDisabler): endpoint rows
   * first (sorted, `locked`), then deliveries (`upd` waits for `counters` through its scalar
   * subquery). A delivery skipped while its attempt was in flight (its endpoint was disabled)
   * stays skipped: its retry must not be sent, even after a re-enable (no catch-up).
   */
  private async writeOnce(results: AttemptResult[]): Promise<(number | null)[]> {
    const counters = failureCounterChanges(results);
    const counterIds = [...counters.keys()].sort();
    const a = results.map((r) => r.attempt);
    const { rows } = await this.pool.query<CounterRow>({
      name: "dw-record",
      text: RECORD_SQL,
      values: [
        counterIds,
        counterIds.map((id) => counters.get(id)!.reset),
        counterIds.map((id) => counters.get(id)!.n),
        ...attemptColumnArrays(results.map((r) => r.attempt)),
        results.map((r) => r.status),
        results.map((r) => (r.nextAttemptAt === null ? null : r.nextAttemptAt.toISOString())),
      ],
    });
    const failuresById = new Map(rows.map((row) => [row.id, row.consecutive_failures]));
    return results.map((r) => (r.counts ? (failuresById.get(r.endpointId) ?? null) : null));
  }
}

/** PostgreSQL deadlock (40P01) or serialization failure (40001). */
function isRetryableTransactionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "40P01" || code === "40001") return true;
  const text = err instanceof Error ? `${err.message} ${JSON.stringify((err as { cause?: unknown }).cause ?? "")}` : "";
  return /deadlock detected|40P01|could not serialize|40001/.test(text);
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
