/**
 * How the DeliveryLog reaches PostgreSQL: through a `pg` pool (named prepared statements, parsed
 * and planned once per connection: the worker's and the auth hook's hot paths) or through Prisma
 * (`$queryRawUnsafe`, for services that hold only a Prisma client, and to join a Prisma
 * transaction such as an endpoint disable). The SQL is the same either way.
 * Behind a transaction-pooling PgBouncer (a pool built from settings with `pgbouncer`), the pool's
 * connections drop each statement's name (client.ts), so the same runner sends unnamed ones.
 */
import type pg from "pg";
import { withPooledClient } from "../client.js";
import type { Prisma, PrismaClient } from "../generated/prisma/client.js";

/** One statement: a stable name (the prepared statement's, with pg) and its text. */
export interface Statement {
  name: string;
  text: string;
}

/** Runs the DeliveryLog's statements, possibly inside a transaction. */
export interface SqlRunner {
  query<R>(statement: Statement, values: readonly unknown[]): Promise<R[]>;
  /** Runs `fn` in one transaction (committed when it resolves, rolled back when it rejects). */
  transaction<T>(fn: (tx: SqlRunner) => Promise<T>): Promise<T>;
}

/** A runner over a pg pool (or one checked-out client, already in a transaction). */
export function pgRunner(pool: pg.Pool | pg.PoolClient): SqlRunner {
  const runner: SqlRunner = {
    async query<R>(statement: Statement, values: readonly unknown[]): Promise<R[]> {
      const result = await pool.query({ name: statement.name, text: statement.text, values: values as unknown[] });
      return result.rows as R[];
    },
    async transaction<T>(fn: (tx: SqlRunner) => Promise<T>): Promise<T> {
      if (!("totalCount" in pool)) return fn(runner); // a client: already the caller's transaction
      return withPooledClient(pool, async (client) => {
        try {
          await client.query("BEGIN");
          const result = await fn(pgRunner(client));
          await client.query("COMMIT");
          return result;
        } catch (err) {
          await client.query("ROLLBACK").catch(() => undefined);
          throw err;
        }
      });
    },
  };
  return runner;
}

/** Interactive transaction limits: an intake of 500 events with many endpoints writes thousands of rows. */
const PRISMA_TRANSACTION_OPTIONS = { maxWait: 10_000, timeout: 30_000 } as const;

/** A runner over a Prisma client, or over the `tx` of one of its interactive transactions. */
export function prismaRunner(prisma: PrismaClient | Prisma.TransactionClient): SqlRunner {
  const runner: SqlRunner = {
    query<R>(statement: Statement, values: readonly unknown[]): Promise<R[]> {
      return prisma.$queryRawUnsafe<R[]>(statement.text, ...values);
    },
    transaction<T>(fn: (tx: SqlRunner) => Promise<T>): Promise<T> {
      if (!("$transaction" in prisma)) return fn(runner);
      return (prisma as PrismaClient).$transaction((tx) => fn(prismaRunner(tx)), PRISMA_TRANSACTION_OPTIONS);
    },
  };
  return runner;
}
