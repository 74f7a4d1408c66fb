/**
 * Daily partitions of the delivery log and retention by whole partitions. `ensureAhead` creates
 * (and attaches) the partitions of the next days for the three tables, idempotently and one
 * replica at a time (the SQL function takes a transaction advisory lock, see the migration).
 * `dropExpired` removes the days entirely past retention: each partition is detached with
 * `DETACH PARTITION ... CONCURRENTLY` (writers keep going; there is no DEFAULT partition, which
 * would forbid it) and then dropped; the log's rows are never deleted one by one. Attempts go
 * first, then deliveries, then events, so nothing ever points into a day already gone. Before
 * them, the rows of those days in the two tables that are not partitioned are deleted: the final
 * states of their deliveries, and their events' keys (in batches).
 */
import type pg from "pg";
import { createPgClient, databaseSettingsOf, withPooledClient } from "../client.js";
import { DELETE_EVENT_KEYS_BEFORE, DELETE_STATES_BEFORE } from "./log-statements.js";

/** Event keys deleted per statement by retention (each a short transaction, so intakes never wait long). */
const EVENT_KEYS_BATCH = 10_000;

/** The log tables, in the order their partitions are dropped. */
export const LOG_TABLES = ["delivery_attempts", "webhook_deliveries", "webhook_events"] as const;

/** What one {@link LogPartitions.dropExpired} did, for logs and metrics. */
export interface DroppedPartition {
  table: string;
  partition: string;
  /** The day (YYYY-MM-DD, UTC) it held. */
  day: string;
  /** Time spent detaching then dropping it (ms). */
  detachMs: number;
  dropMs: number;
}

const DAY_MS = 86_400_000;
/** Session advisory lock key of the retention run (one replica at a time). */
const RETENTION_LOCK = "vw-log-retention";

/** UTC day of `date`, as YYYY-MM-DD. */
export const utcDay = (date: Date): string => date.toISOString().slice(0, 10);

/** See the file comment. */
export class LogPartitions {
  constructor(private readonly pool: pg.Pool) {}

  /** Creates the missing partitions from yesterday to `daysAhead` days ahead; resolves with how many. */
  async ensureAhead(daysAhead: number, now: Date = new Date()): Promise<number> {
    const from = utcDay(new Date(now.getTime() - DAY_MS));
    const to = utcDay(new Date(now.getTime() + daysAhead * DAY_MS));
    const { rows } = await this.pool.query<{ n: number }>("SELECT vw_create_log_partitions($1::date, $2::date) AS n", [from, to]);
    return rows[0]?.n ?? 0;
  }

  /** Partitions of `table` with their day, oldest first (including ones left half-detached). */
  async list(table: (typeof LOG_TABLES)[number]): Promise<{ partition: string; day: string; detachPending: boolean }[]> {
    const { rows } = await this.pool.query<{ partition: string; detach_pending: boolean }>(
      `SELECT c.relname AS partition, i.inhdetachpending AS detach_pending
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = $1::regclass AND c.relkind = 'r' ORDER BY c.relname`,
      [table],
    );
    return rows.flatMap((row) => {
      const m = /_p(\d{4})(\d{2})(\d{2})$/.exec(row.partition);
      return m ? [{ partition: row.partition, day: `${m[1]}-${m[2]}-${m[3]}`, detachPending: row.detach_pending }] : [];
    });
  }

  /**
   * Detaches and drops every partition whose whole day is older than `retentionDays` before `now`
   * (a delivery is kept at least `retentionDays`, at most one day more). Resolves with what went;
   * does nothing when another replica is running it (session advisory lock).
   *
   * The lock and the detaches span many transactions (`DETACH ... CONCURRENTLY` cannot run inside
   * one), so the run needs a session of its own. A pool's connection is one, except behind a
   * transaction-pooling PgBouncer (the pool's settings say `pgbouncer`): there the lock would be
   * taken on one server connection and released on another, or never. Then the run opens one
   * connection to DIRECT_URL (PostgreSQL itself) for its duration, and closes it.
   */
  async dropExpired(retentionDays: number, now: Date = new Date()): Promise<DroppedPartition[]> {
    const settings = databaseSettingsOf(this.pool);
    if (!settings?.pgbouncer) return withPooledClient(this.pool, (client) => this.dropExpiredOn(client, retentionDays, now));
    const session = createPgClient(settings);
    // A connection lost mid-run fails the statement in progress, which fails the run; without a
    // listener the error would also end the process.
    session.on("error", () => undefined);
    await session.connect();
    try {
      return await this.dropExpiredOn(session, retentionDays, now);
    } finally {
      await session.end().catch(() => undefined);
    }
  }

  private async dropExpiredOn(client: pg.ClientBase, retentionDays: number, now: Date): Promise<DroppedPartition[]> {
    const cutoffDay = utcDay(new Date(now.getTime() - retentionDays * DAY_MS));
    const { rows } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [RETENTION_LOCK]);
    if (!rows[0]?.ok) return [];
    try {
      const dropped: DroppedPartition[] = [];
      // The states of the deliveries about to go (final ones: failed or skipped) go first, so no
      // state row outlives its delivery.
      const cutoff = `${cutoffDay}T00:00:00Z`;
      await client.query({ name: DELETE_STATES_BEFORE.name, text: DELETE_STATES_BEFORE.text, values: [cutoff] });
      // The ids of the events about to go can be accepted again: row by row, in batches, since
      // the keys' table is not partitioned (what makes an intake's deduplication one probe).
      for (;;) {
        const { rows: deleted } = await client.query<{ n: number }>({ name: DELETE_EVENT_KEYS_BEFORE.name, text: DELETE_EVENT_KEYS_BEFORE.text, values: [cutoff, EVENT_KEYS_BATCH] });
        if ((deleted[0]?.n ?? 0) < EVENT_KEYS_BATCH) break;
      }
      for (const table of LOG_TABLES) {
        for (const p of await this.list(table)) {
          // A partition for day D holds [D, D+1): expired when D+1 <= the cutoff's day.
          if (p.day >= cutoffDay) continue;
          const t0 = Date.now();
          // A detach interrupted earlier (crash, cancel) is completed with FINALIZE instead.
          await client.query(`ALTER TABLE ${quoteIdent(table)} DETACH PARTITION ${quoteIdent(p.partition)} ${p.detachPending ? "FINALIZE" : "CONCURRENTLY"}`);
          const t1 = Date.now();
          await client.query(`DROP TABLE ${quoteIdent(p.partition)}`);
          dropped.push({ table, partition: p.partition, day: p.day, detachMs: t1 - t0, dropMs: Date.now() - t1 });
        }
      }
      // The stats rollup only ever serves the last 24 h: two days is plenty (a small table).
      await client.query("DELETE FROM endpoint_stats WHERE bucket < $1::timestamptz", [new Date(now.getTime() - 2 * DAY_MS).toISOString()]);
      return dropped;
    } finally {
      await client.query("SELECT pg_advisory_unlock(hashtext($1))", [RETENTION_LOCK]);
    }
  }
}

/** A partition or table name as an SQL identifier (ours match [a-z0-9_], quoted anyway). */
function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
