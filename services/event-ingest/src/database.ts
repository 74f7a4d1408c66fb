import { DeliveryLog, MemberDirectory, WorldDirectory, pgRunner, type PgPool, type SqlRunner } from "@vw/db";

/**
 * event-ingest's one way to PostgreSQL (docs/decisions/0012-one-database-path-per-process.md): one
 * `pg` pool, bounded by DATABASE_POOL_MAX, one runner over it (named prepared statements, or plain
 * ones behind PgBouncer), and each owner of the tables it touches built once, here, and handed to
 * every part that needs it (the event intake, the member intake, analytics, the auth hook). Only
 * the auth hook's LISTEN connection (to DIRECT_URL) is outside the pool.
 */
export interface IngestDatabase {
  /** The process's pool; `/readyz` pings it, shutdown ends it. */
  pool: PgPool;
  sql: SqlRunner;
  log: DeliveryLog;
  members: MemberDirectory;
  worlds: WorldDirectory;
}

/** Builds the owners over `pool`; once per process (main.ts), or per test app. */
export function ingestDatabase(pool: PgPool): IngestDatabase {
  const sql = pgRunner(pool);
  return { pool, sql, log: new DeliveryLog(sql), members: new MemberDirectory(sql), worlds: new WorldDirectory(sql) };
}

/** Resolves when PostgreSQL answers a trivial statement through the process's runner; for `/readyz`. */
export async function pingDatabase(db: Pick<IngestDatabase, "sql">): Promise<void> {
  await db.sql.query({ name: "vw_ping", text: "SELECT 1" }, []);
}
