/**
 * The database variables every service reads the same way: where its pooled connections go
 * (`DATABASE_URL`, possibly a transaction-pooling PgBouncer), where migrations and LISTEN go
 * (`DIRECT_URL`, PostgreSQL itself), how many connections the process may open, and the name it
 * shows in `pg_stat_activity`.
 */

/**
 * The part of service-kit's `EnvReader` that {@link readDatabaseSettings} uses. Declared here so
 * that packages/db does not depend on service-kit; any `EnvReader` fits it.
 */
export interface DatabaseEnvReader {
  url(name: string, fallback?: string, protocols?: string[]): string;
  optionalString(name: string): string | undefined;
  int(name: string, fallback: number, opts?: { min?: number; max?: number }): number;
  problem(message: string): void;
}

/** How a process reaches PostgreSQL; the result of {@link readDatabaseSettings}. */
export interface DatabaseSettings {
  /** DATABASE_URL without its `pgbouncer` parameter: what the pools connect to. */
  url: string;
  /** DIRECT_URL, or {@link url} when unset: PostgreSQL itself, for migrations and LISTEN. */
  directUrl: string;
  /**
   * `?pgbouncer=true` on DATABASE_URL (Prisma's convention): a pooler in transaction mode sits in
   * front, so no connection may carry state from one transaction to the next (no named prepared
   * statements, no session `SET`, advisory locks only inside a transaction).
   */
  pgbouncer: boolean;
  /** DATABASE_POOL_MAX: the connections the process opens to {@link url}, all pools together. */
  poolMax: number;
  /** `application_name` of every connection: the service's name. */
  applicationName: string;
}

/** Options of {@link readDatabaseSettings}. */
export interface DatabaseSettingsOptions {
  /** The service's name, e.g. `event-ingest`; becomes `application_name`. */
  service: string;
  /** The service's documented DATABASE_POOL_MAX default. */
  defaultPoolMax: number;
}

const POSTGRES_PROTOCOLS = ["postgres:", "postgresql:"];

/**
 * Reads DATABASE_URL, DIRECT_URL and DATABASE_POOL_MAX. Problems (a malformed URL, a `pgbouncer`
 * value other than true/false, a pool size below 1) go to the reader, which names them when the
 * service's config is done.
 */
export function readDatabaseSettings(r: DatabaseEnvReader, opts: DatabaseSettingsOptions): DatabaseSettings {
  const raw = r.url("DATABASE_URL", undefined, POSTGRES_PROTOCOLS);
  const { url, pgbouncer } = withoutPgbouncerParam(raw, r);
  const directRaw = r.optionalString("DIRECT_URL") === undefined ? undefined : r.url("DIRECT_URL", undefined, POSTGRES_PROTOCOLS);
  // A DIRECT_URL copied from DATABASE_URL may carry the flag too; PostgreSQL itself needs none.
  const directUrl = directRaw === undefined ? url : withoutPgbouncerParam(directRaw, r).url;
  const poolMax = r.int("DATABASE_POOL_MAX", opts.defaultPoolMax, { min: 1 });
  return { url, directUrl, pgbouncer, poolMax, applicationName: opts.service };
}

/**
 * `raw` without its `pgbouncer` query parameter, and whether it was `true`. The parameter is
 * Prisma's convention, not libpq's: it tells this process how to talk, and is no business of pg's.
 */
function withoutPgbouncerParam(raw: string, r: DatabaseEnvReader): { url: string; pgbouncer: boolean } {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    return { url: raw, pgbouncer: false }; // already reported by r.url
  }
  const value = parsed.searchParams.get("pgbouncer");
  if (value === null) return { url: raw, pgbouncer: false };
  if (!/^(true|false)$/i.test(value)) r.problem(`DATABASE_URL's pgbouncer parameter must be true or false, got "${value}"`);
  parsed.searchParams.delete("pgbouncer");
  return { url: parsed.toString(), pgbouncer: /^true$/i.test(value) };
}
