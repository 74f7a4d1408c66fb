import pg from "pg";

/**
 * Catalog columns of type `name` (OID 19), `"char"` (18) and their arrays (1003, 1002) are unknown
 * to @prisma/adapter-pg 6.19, which fails with "Column type 'name' could not be deserialized"
 * (a known Prisma defect). The migrate commands read such columns, and so does any raw query on
 * `information_schema` or `pg_catalog`.
 *
 * A `types.getTypeParser` on the pool cannot help: the adapter passes its own per query, and a
 * parser cannot change the column type the adapter decides on. This client rewrites the type OIDs
 * of the row description before the result is built instead; the values are text on the wire
 * either way, so they are read as `text` (25) and `text[]` (1009).
 * `_handleRowDescription` is an internal hook of pg (pinned at 8.23.1); should a later pg stop
 * calling it, the override is simply never called and only those catalog reads fail again.
 */
const TEXT_LIKE_OIDS: Readonly<Record<number, number>> = { 18: 25, 19: 25, 1002: 1009, 1003: 1009 };

export class CatalogTolerantClient extends pg.Client {
  _handleRowDescription(msg: { fields: { dataTypeID: number }[] }): void {
    for (const field of msg.fields) field.dataTypeID = TEXT_LIKE_OIDS[field.dataTypeID] ?? field.dataTypeID;
    (pg.Client.prototype as unknown as { _handleRowDescription(m: unknown): void })._handleRowDescription.call(this, msg);
  }
}

/**
 * Connection fields of a `postgres://` / `postgresql://` URL as separate pg options (host, port,
 * user, password, database, ssl), percent-decoded. `sslmode=disable` or no sslmode: no TLS;
 * `verify-full`: TLS with certificate checks; any other mode: TLS without them (libpq's `require`).
 */
export function connectionFieldsFromUrl(databaseUrl: string): pg.ClientConfig {
  const url = new URL(databaseUrl);
  const sslmode = url.searchParams.get("sslmode");
  const config: pg.ClientConfig = {
    host: decodeURIComponent(url.hostname.replace(/^\[(.*)\]$/, "$1")) || "localhost",
    port: url.port ? Number(url.port) : 5432,
  };
  if (url.username) config.user = decodeURIComponent(url.username);
  if (url.password) config.password = decodeURIComponent(url.password);
  const database = decodeURIComponent(url.pathname.replace(/^\//, ""));
  if (database) config.database = database;
  if (sslmode && sslmode !== "disable") config.ssl = { rejectUnauthorized: sslmode === "verify-full" };
  return config;
}

const unnamedClasses = new WeakMap<typeof pg.Client, typeof pg.Client>();

/**
 * A subclass of `base` whose `query` drops the `name` of a query config, so pg sends an unnamed
 * statement (Parse, Bind and Execute in one round trip, the plan not kept). For connections through
 * a transaction-pooling PgBouncer (1.18, Debian's, keeps no prepared statement across transactions):
 * a named statement prepared on one server connection fails with "prepared statement does not
 * exist" on the next. Query objects that submit themselves (cursors, streams) pass unchanged.
 */
export function withoutStatementNames(base: typeof pg.Client): typeof pg.Client {
  const known = unnamedClasses.get(base);
  if (known) return known;
  const baseQuery = base.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
  class UnnamedStatementClient extends base {}
  (UnnamedStatementClient.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function query(
    this: pg.Client,
    config: unknown,
    ...rest: unknown[]
  ): unknown {
    if (isNamedConfig(config)) {
      const { name: _name, ...unnamed } = config;
      return baseQuery.call(this, unnamed, ...rest);
    }
    return baseQuery.call(this, config, ...rest);
  };
  unnamedClasses.set(base, UnnamedStatementClient);
  return UnnamedStatementClient;
}

function isNamedConfig(config: unknown): config is { name: string } & Record<string, unknown> {
  if (config === null || typeof config !== "object") return false;
  const c = config as { name?: unknown; submit?: unknown };
  return typeof c.submit !== "function" && c.name !== undefined;
}
