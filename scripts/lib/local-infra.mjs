/**
 * The local stand-ins for production infrastructure, shared by jest's global setup, `pnpm dev`
 * and `pnpm bench`: an embedded S3-protocol server (s3rver), PostgreSQL databases created and
 * dropped on the machine's server, and Prisma migrations. Redis is used as it is (REDIS_URL).
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import S3rver from "s3rver";
import { childEnv, run } from "./toolchain.mjs";

/** Admin connection used to create and drop databases (test, bench). */
export const DEFAULT_PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres";
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0";

/** s3rver accepts any request signed with these. */
export const S3RVER_CREDENTIALS = Object.freeze({ accessKeyId: "S3RVER", secretAccessKey: "S3RVER" });

/** A short random suffix usable in database names (`[a-z0-9_]`) and bucket names (after `_` → `-`). */
export function randomSuffix(bytes = 4) {
  return randomBytes(bytes).toString("hex");
}

/**
 * Starts s3rver on 127.0.0.1 with `bucket` created. `port` 0 (the default) picks a free port;
 * without `directory` a temporary one is used and removed by `stop()`.
 * @returns {Promise<{endpoint: string, port: number, bucket: string, env: Record<string,string>, stop: () => Promise<void>}>}
 *   `env` holds the S3_* variables the services read.
 */
export async function startS3rver({ directory, bucket, port = 0 } = {}) {
  if (!bucket || bucket.length < 3) throw new Error("startS3rver: a bucket name of 3+ characters is required");
  const temporary = !directory;
  const dir = directory ?? mkdtempSync(join(tmpdir(), "vw-s3rver-"));
  mkdirSync(dir, { recursive: true });
  const server = new S3rver({ port, address: "127.0.0.1", silent: true, directory: dir, configureBuckets: [{ name: bucket }] });
  let address;
  try {
    address = await server.run();
  } catch (err) {
    if (temporary) rmSync(dir, { recursive: true, force: true });
    if (err?.code === "EADDRINUSE") throw new Error(`s3rver: port ${port} on 127.0.0.1 is already in use`);
    throw err;
  }
  const endpoint = `http://127.0.0.1:${address.port}`;
  let stopped = false;
  return {
    endpoint,
    port: address.port,
    bucket,
    env: {
      S3_ENDPOINT: endpoint,
      S3_REGION: "us-east-1",
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
      S3_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
      S3_FORCE_PATH_STYLE: "true",
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.close();
      if (temporary) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `adminUrl` with its database replaced by `name`. */
export function databaseUrlFor(adminUrl, name) {
  const url = new URL(adminUrl);
  url.pathname = `/${encodeURIComponent(name)}`;
  return url.toString();
}

/** The database named in a connection URL, and an admin URL (database `postgres`) on the same server. */
export function splitDatabaseUrl(databaseUrl) {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ""));
  if (!name) throw new Error(`no database name in ${redact(databaseUrl)}`);
  url.pathname = "/postgres";
  return { name, adminUrl: url.toString() };
}

function quoteIdent(name) {
  return `"${name.replace(/"/g, '""')}"`;
}

/** A connection URL with its password replaced, fit for logs. */
export function redact(connectionUrl) {
  try {
    const url = new URL(connectionUrl);
    if (url.password) url.password = "***";
    return url.toString();
  } catch {
    return "<unparsable URL>";
  }
}

async function withAdmin(adminUrl, fn) {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (err) {
    throw new Error(`cannot connect to PostgreSQL at ${redact(adminUrl)}: ${err.message}`);
  }
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Creates database `name` through `adminUrl` unless it exists.
 * @returns {Promise<{databaseUrl: string, created: boolean}>}
 */
export async function ensureDatabase(adminUrl, name) {
  const created = await withAdmin(adminUrl, async (client) => {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (rowCount > 0) return false;
    try {
      await client.query(`CREATE DATABASE ${quoteIdent(name)}`);
      return true;
    } catch (err) {
      if (err.code === "42P04") return false; // created meanwhile by someone else
      throw err;
    }
  });
  return { databaseUrl: databaseUrlFor(adminUrl, name), created };
}

/**
 * Creates database `name` as a copy of `template` (a file copy: much faster than migrating again).
 * The template must have no connections. Retries while another copy of it is being made.
 */
export async function createDatabaseFromTemplate(adminUrl, name, template) {
  await withAdmin(adminUrl, async (client) => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await client.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${quoteIdent(template)}`);
        return;
      } catch (err) {
        // 55006: "source database is being accessed by other users" (a concurrent copy).
        if (err.code !== "55006" || attempt >= 50) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  });
  return { databaseUrl: databaseUrlFor(adminUrl, name) };
}

/** Drops every database whose name starts with `prefix` (a test run's), disconnecting their clients. */
export async function dropDatabasesStartingWith(adminUrl, prefix) {
  await withAdmin(adminUrl, async (client) => {
    const { rows } = await client.query("SELECT datname FROM pg_database WHERE starts_with(datname, $1)", [prefix]);
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(datname)} WITH (FORCE)`);
  });
}

/** Drops database `name` (if it exists), disconnecting whoever is still connected to it. */
export async function dropDatabase(adminUrl, name) {
  await withAdmin(adminUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`));
}

/**
 * Applies the Prisma migrations of packages/db to `databaseUrl`
 * (`pnpm --filter @vw/db exec prisma migrate deploy`). Throws with the command's output on failure.
 */
export async function migrate(databaseUrl) {
  const { code, output } = await run("pnpm", ["--filter", "@vw/db", "exec", "prisma", "migrate", "deploy"], {
    capture: true,
    // DIRECT_URL too: prisma.config.ts migrates through it when set, and one left in the caller's
    // environment would send these migrations to another database.
    env: childEnv(process.env, { DATABASE_URL: databaseUrl, DIRECT_URL: databaseUrl }),
  });
  if (code !== 0) throw new Error(`prisma migrate deploy on ${redact(databaseUrl)} failed (exit ${code}):\n${output}`);
  return output;
}

/** Resolves when a TCP connection to the host and port of `serviceUrl` succeeds; rejects naming `label` otherwise. */
export function assertReachable(serviceUrl, label, defaultPort) {
  const url = new URL(serviceUrl);
  const host = url.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1";
  const port = Number(url.port || defaultPort);
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port, timeout: 3000 });
    socket.once("connect", () => {
      socket.end();
      resolve();
    });
    const fail = (why) => {
      socket.destroy();
      reject(new Error(`${label} is not reachable at ${host}:${port} (${why})`));
    };
    socket.once("timeout", () => fail("timed out"));
    socket.once("error", (err) => fail(err.code ?? err.message));
  });
}
