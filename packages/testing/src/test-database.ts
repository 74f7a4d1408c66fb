/**
 * A database of one's own for a test file, copied from the run's migrated template (made by the
 * jest global setup, test/global-setup.js): for tests whose code reads every row of a table, such
 * as the reconciler walking every pending delivery, where sharing the run's database would let one
 * file's worker act on another file's rows.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

/** A database made by {@link createTestDatabase}. */
export interface TestDatabase {
  name: string;
  url: string;
  /** Drops it, disconnecting whoever is still connected. */
  drop(): Promise<void>;
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

async function withAdmin<T>(adminUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A fresh, migrated database on the run's PostgreSQL (`TEST_PG_ADMIN_URL`, `VW_TEST_DB_TEMPLATE`). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = process.env.TEST_PG_ADMIN_URL;
  const template = process.env.VW_TEST_DB_TEMPLATE;
  if (!adminUrl || !template) throw new Error("TEST_PG_ADMIN_URL and VW_TEST_DB_TEMPLATE are not set: run the tests through `pnpm test` (jest global setup)");
  // Named after the template's run, so the global teardown drops it even if this file does not.
  const name = `${template.replace(/_tpl$/, "")}_${randomBytes(4).toString("hex")}`;
  await withAdmin(adminUrl, async (client) => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await client.query(`CREATE DATABASE ${quote(name)} TEMPLATE ${quote(template)}`);
        return;
      } catch (err) {
        // 55006: the template is being copied by another file at this moment.
        if ((err as { code?: string }).code !== "55006" || attempt >= 50) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  });
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => withAdmin(adminUrl, async (client) => void (await client.query(`DROP DATABASE IF EXISTS ${quote(name)} WITH (FORCE)`))),
  };
}
