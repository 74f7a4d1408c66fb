/**
 * The connection layer behind a real transaction-pooling PgBouncer (Debian's 1.18, which keeps no
 * prepared statement across transactions): migrations through DIRECT_URL, pools built from
 * settings with `?pgbouncer=true` send no named statement and name their connections, LISTEN and
 * retention's session lock go to PostgreSQL itself. A control shows that named statements do
 * fail through this PgBouncer, so the other tests can.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { createTestDatabase, startPgBouncer, type PgBouncer, type TestDatabase } from "@vw/testing";
import { createPgClient, createPgPool, createPrismaClient, LogPartitions, pgRunner, readDatabaseSettings, type DatabaseSettings, type PgNotification } from "../../src/index.js";

const DB_PACKAGE = fileURLToPath(new URL("../..", import.meta.url));

let bouncer: PgBouncer;
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  // One server connection: two client connections then share it, which is when a named statement breaks.
  bouncer = await startPgBouncer({ targetUrl: db.url, poolSize: 1 });
}, 60_000);
afterAll(async () => {
  await bouncer?.stop();
  await db?.drop();
});

/** What a service reads from DATABASE_URL (PgBouncer, ?pgbouncer=true) and DIRECT_URL (PostgreSQL). */
function settingsFor(directUrl: string, service = "pgbouncer-test"): DatabaseSettings {
  const problems: string[] = [];
  const env: Record<string, string> = { DATABASE_URL: bouncer.urlFor(directUrl), DIRECT_URL: directUrl };
  const settings = readDatabaseSettings(
    {
      url: (name) => env[name] ?? "",
      optionalString: (name) => env[name],
      int: (_name, fallback) => fallback,
      problem: (m) => problems.push(m),
    },
    { service, defaultPoolMax: 4 },
  );
  expect(problems).toEqual([]);
  return settings;
}

/** Runs the same named statement on two connections of `pool` at once (so on PgBouncer's one server connection in turn). */
async function sameNamedStatementOnTwoConnections(pool: pg.Pool): Promise<void> {
  const a = await pool.connect();
  const b = await pool.connect();
  try {
    const statement = { name: `probe-${randomBytes(3).toString("hex")}`, text: "SELECT $1::int + 1 AS n", values: [1] };
    await a.query(statement);
    await b.query(statement);
    await a.query(statement);
  } finally {
    a.release();
    b.release();
  }
}

describe("through a transaction-pooling PgBouncer", () => {
  it("control: a plain pool's named statements fail there (the prepared statement is on another client's server connection)", async () => {
    const url = new URL(bouncer.urlFor(db.url));
    url.searchParams.delete("pgbouncer");
    const plain = new pg.Pool({ connectionString: url.toString(), max: 2 });
    try {
      await expect(sameNamedStatementOnTwoConnections(plain)).rejects.toThrow(/prepared statement .* (already exists|does not exist)/);
    } finally {
      await plain.end();
    }
  });

  it("a pool from settings with ?pgbouncer=true sends them unnamed, in and out of transactions, and names its connections", async () => {
    const settings = settingsFor(db.url);
    expect(settings.pgbouncer).toBe(true);
    const pool = createPgPool(settings, { max: 2 });
    try {
      await sameNamedStatementOnTwoConnections(pool);
      const runner = pgRunner(pool);
      const statement = { name: "pgb-probe", text: "SELECT current_setting('application_name') AS app" };
      const inTransaction = await runner.transaction(async (tx) => {
        await tx.query(statement, []);
        return tx.query<{ app: string }>(statement, []);
      });
      expect(inTransaction).toEqual([{ app: "pgbouncer-test" }]);
      await Promise.all([runner.query(statement, []), runner.query(statement, [])]);
    } finally {
      await pool.end();
    }
  });

  it("Prisma over the same settings runs queries and an interactive transaction, as the service's name", async () => {
    const prisma = createPrismaClient(settingsFor(db.url, "pgbouncer-prisma"), { max: 2 });
    try {
      const apps = await Promise.all([1, 2, 3].map(() => prisma.$queryRaw<{ app: string }[]>`SELECT current_setting('application_name') AS app`));
      expect(apps.flat()).toEqual([{ app: "pgbouncer-prisma" }, { app: "pgbouncer-prisma" }, { app: "pgbouncer-prisma" }]);
      const slug = `pgb-${randomBytes(4).toString("hex")}`;
      await prisma.$transaction(async (tx) => {
        await tx.organization.create({ data: { slug, name: slug } });
        await tx.organization.update({ where: { slug }, data: { name: `${slug}!` } });
      });
      expect((await prisma.organization.findUnique({ where: { slug } }))?.name).toBe(`${slug}!`);
    } finally {
      await prisma.$disconnect();
    }
  });

  it("LISTEN goes to DIRECT_URL and hears a NOTIFY sent through PgBouncer", async () => {
    const settings = settingsFor(db.url);
    const listener = createPgClient(settings);
    listener.on("error", () => undefined);
    const pool = createPgPool(settings, { max: 1 });
    try {
      await listener.connect();
      expect(listener.port).toBe(Number(new URL(db.url).port || 5432));
      expect(listener.port).not.toBe(bouncer.port);
      const heard = new Promise<PgNotification>((resolve) => listener.once("notification", resolve));
      await listener.query("LISTEN pgb_probe");
      await pool.query("SELECT pg_notify('pgb_probe', 'hello')");
      expect((await heard).payload).toBe("hello");
    } finally {
      await listener.end();
      await pool.end();
    }
  });

  it("retention takes and releases its lock on a session of its own: back to back runs both run, and no advisory lock is left", async () => {
    const pool = createPgPool(settingsFor(db.url), { max: 2 });
    const direct = new pg.Client({ connectionString: db.url });
    await direct.connect();
    try {
      const partitions = new LogPartitions(pool);
      await partitions.ensureAhead(3);
      // Something to drop, so a run that skipped (lock held elsewhere) would show: the partitions of
      // 40 days ago, made now, and a retention of 30 days.
      const old = new Date(Date.now() - 40 * 86_400_000);
      await pool.query("SELECT vw_create_log_partitions($1::date, $1::date)", [old.toISOString().slice(0, 10)]);
      const first = await partitions.dropExpired(30);
      expect(first.map((d) => d.table).sort()).toEqual(["delivery_attempts", "webhook_deliveries", "webhook_events"]);
      await pool.query("SELECT vw_create_log_partitions($1::date, $1::date)", [old.toISOString().slice(0, 10)]);
      const second = await partitions.dropExpired(30);
      expect(second).toHaveLength(3);
      const { rows } = await direct.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())");
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await direct.end();
      await pool.end();
    }
  });
});

describe("without a pooler", () => {
  it("a pool from settings keeps the hot paths' named prepared statements, and names its connections", async () => {
    const problems: string[] = [];
    const settings = readDatabaseSettings(
      { url: () => db.url, optionalString: () => undefined, int: (_n, fallback) => fallback, problem: (m) => problems.push(m) },
      { service: "direct-test", defaultPoolMax: 1 },
    );
    expect({ problems, pgbouncer: settings.pgbouncer }).toEqual({ problems: [], pgbouncer: false });
    const pool = createPgPool(settings, { max: 1 });
    try {
      const runner = pgRunner(pool);
      const name = `kept-${randomBytes(3).toString("hex")}`;
      await runner.query({ name, text: "SELECT 1 AS one" }, []);
      // One connection: the statement prepared above is in this session's catalogue.
      const rows = await runner.query<{ name: string; app: string }>(
        { name: "kept-check", text: "SELECT name, current_setting('application_name') AS app FROM pg_prepared_statements WHERE name = $1" },
        [name],
      );
      expect(rows).toEqual([{ name, app: "direct-test" }]);
    } finally {
      await pool.end();
    }
  });
});

describe("migrations", () => {
  let fresh: { name: string; url: string } | undefined;
  afterAll(async () => {
    if (!fresh) return;
    const admin = new pg.Client({ connectionString: process.env.TEST_PG_ADMIN_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${fresh.name}" WITH (FORCE)`);
    await admin.end();
  });

  it("run through DIRECT_URL when DATABASE_URL is the pooler", async () => {
    const adminUrl = process.env.TEST_PG_ADMIN_URL!;
    // Named after the run's template, so the global teardown drops it should this file not.
    const name = `${process.env.VW_TEST_DB_TEMPLATE!.replace(/_tpl$/, "")}_mig${randomBytes(3).toString("hex")}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
    await admin.end();
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    fresh = { name, url: url.toString() };
    const settings = settingsFor(fresh.url);
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn("pnpm", ["exec", "prisma", "migrate", "deploy"], {
        cwd: DB_PACKAGE,
        env: { ...process.env, DATABASE_URL: bouncer.urlFor(fresh!.url), DIRECT_URL: settings.directUrl },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      child.on("close", (c) => resolve({ code: c, output: out }));
    });
    expect({ code, output }).toEqual({ code: 0, output: expect.stringMatching(/applied|No pending migrations/) });
    // The app's path, through PgBouncer, sees the migrated schema.
    const pool = createPgPool(settings, { max: 1 });
    try {
      const { rows } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL");
      expect(rows[0]!.n).toBeGreaterThan(10);
    } finally {
      await pool.end();
    }
  }, 180_000);
});
