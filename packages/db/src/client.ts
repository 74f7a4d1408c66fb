import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "./generated/prisma/client.js";
import type { DatabaseSettings } from "./database-settings.js";
import { CatalogTolerantClient, withoutStatementNames } from "./pg-compat.js";

/**
 * Where a pool connects: a bare URL (as in tests and tools), or a service's
 * {@link DatabaseSettings}, which add `application_name` and the PgBouncer mode.
 */
export type DatabaseTarget = string | DatabaseSettings;

/** The pg options common to every pool of `target`, and the client class its connections use. */
function poolBase(target: DatabaseTarget, base: typeof pg.Client): { config: pg.PoolConfig; Client: typeof pg.Client } {
  if (typeof target === "string") return { config: { connectionString: target }, Client: base };
  return {
    config: { connectionString: target.url, application_name: target.applicationName },
    // Behind a transaction-pooling PgBouncer, consecutive statements may run on different server
    // connections: a statement prepared on one is unknown on the next.
    Client: target.pgbouncer ? withoutStatementNames(base) : base,
  };
}

/** Options of {@link createPrismaClient}. */
export interface PrismaClientOptions {
  /** Largest number of pooled connections (pg's default is 10). */
  max?: number;
}

/**
 * Builds the Prisma client of one process. It reaches PostgreSQL through `pg` and the
 * @prisma/adapter-pg driver adapter (no native query engine is used or downloaded).
 * `target` is a `postgresql://` URL (pg reads `sslmode` and the other libpq parameters in it) or a
 * service's {@link DatabaseSettings}: then every connection carries its `application_name`.
 * Create one per process in `main.ts` and `$disconnect()` it on shutdown.
 */
export function createPrismaClient(target: DatabaseTarget, opts: PrismaClientOptions = {}): PrismaClient {
  // CatalogTolerantClient lets raw queries read `name` columns of the catalogs (see pg-compat.ts).
  // The adapter sends unnamed statements already; in PgBouncer mode its client is made to drop
  // names all the same, so that no later adapter version can prepare one by surprise.
  const { config, Client } = poolBase(target, CatalogTolerantClient);
  const adapter = new PrismaPg({
    ...config,
    Client,
    ...(opts.max !== undefined ? { max: opts.max } : {}),
  });
  return new PrismaClient({ adapter });
}

/**
 * A Prisma client over the process's own pool ({@link createPgPool}): its connections are the
 * pool's, so DATABASE_POOL_MAX bounds Prisma and the SQL runner together. `$disconnect()` leaves
 * the pool open; end the pool on shutdown.
 */
export function createPrismaClientOnPool(pool: PgPool): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg(pool) });
}

/** Resolves when the database answers a trivial query; for `/readyz`. */
export async function pingDatabase(prisma: PrismaClient): Promise<void> {
  await prisma.$queryRaw`SELECT 1`;
}

/** A plain `pg` pool, for the few hot statements that are worth bypassing Prisma (see {@link createPgPool}). */
export type PgPool = pg.Pool;

/** Options of {@link createPgPool}. */
export interface PgPoolOptions {
  /** Largest number of pooled connections (pg's default is 10). */
  max?: number;
  /**
   * Called when an idle pooled connection fails (PostgreSQL restarted, network cut). The pool
   * drops that connection and opens a new one on the next query; without a listener pg would
   * throw the error out of the process.
   */
  onIdleError?: (err: Error) => void;
}

/**
 * A `pg` pool on the same URL and driver as {@link createPrismaClient}, for statements on a
 * throughput-critical path: a raw query through Prisma 6 is compiled by its query compiler on
 * every call, where pg sends a named prepared statement that PostgreSQL parses and plans once per
 * connection. Everything else goes through Prisma. `end()` it on shutdown.
 *
 * With {@link DatabaseSettings} whose `pgbouncer` is set, the pool's connections drop the `name`
 * of every statement (pg then sends an unnamed one, parsed and planned each time): a transaction
 * pooler does not keep a prepared statement from one transaction to the next. Without a pooler,
 * statements stay named and the hot paths keep their plans.
 */
export function createPgPool(target: DatabaseTarget, opts: PgPoolOptions = {}): PgPool {
  // CatalogTolerantClient: Prisma may run over this pool too (createPrismaClientOnPool).
  const { config, Client } = poolBase(target, CatalogTolerantClient);
  const pool = new pg.Pool({ ...config, Client, ...(opts.max !== undefined ? { max: opts.max } : {}) });
  if (typeof target !== "string") poolSettings.set(pool, target);
  pool.on("error", (err: Error) => opts.onIdleError?.(err));
  return pool;
}

const poolSettings = new WeakMap<pg.Pool, DatabaseSettings>();

/**
 * The {@link DatabaseSettings} `pool` was built from by {@link createPgPool}, if any: how an owner
 * handed only the pool (the delivery log's partitions) learns that a transaction pooler is in
 * front, and where PostgreSQL itself is.
 */
export function databaseSettingsOf(pool: pg.Pool): DatabaseSettings | undefined {
  return poolSettings.get(pool);
}

/**
 * Runs `fn` with one connection checked out of `pool`, and gives it back. While checked out, the
 * pool no longer listens for the connection's errors: one that breaks between two statements (a
 * PostgreSQL restart in the middle of a transaction) would emit an `error` nobody listens to, and
 * Node ends the process for it. Here the error is caught, the statement in progress fails as it
 * would anyway, and the broken connection is destroyed instead of going back to the pool.
 */
export async function withPooledClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on("error", onError);
  try {
    return await fn(client);
  } catch (err) {
    broken ??= err instanceof Error && /Connection terminated|ECONNRESET|57P0/.test(`${err.message} ${(err as { code?: string }).code ?? ""}`) ? err : undefined;
    throw err;
  } finally {
    client.removeListener("error", onError);
    client.release(broken);
  }
}

/** A single `pg` connection (see {@link createPgClient}). */
export type PgClient = pg.Client;
/** What a LISTENing {@link PgClient} emits as `notification`. */
export type PgNotification = pg.Notification;

/**
 * One dedicated, not yet connected `pg` connection with TCP keep-alive: for a session that must
 * stay open, such as LISTEN. With {@link DatabaseSettings} it goes to `directUrl` (PostgreSQL
 * itself: a transaction pooler cannot hold a LISTEN) and carries `application_name`.
 * Attach `error` and `end` listeners before `connect()`.
 */
export function createPgClient(target: DatabaseTarget): PgClient {
  if (typeof target === "string") return new pg.Client({ connectionString: target, keepAlive: true });
  return new pg.Client({ connectionString: target.directUrl, application_name: target.applicationName, keepAlive: true });
}
