/**
 * The delivery log's partitions carry the autovacuum thresholds a day's partition needs under a
 * steady load (see the migration 20261128100000_log_partition_autovacuum): the ones the migrations
 * made, and every one made afterwards.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { createPgPool, type PgPool } from "../client.js";
import { LogPartitions } from "./log-partitions.js";

let pool: PgPool;
beforeAll(() => {
  pool = createPgPool(process.env.DATABASE_URL!, { max: 2 });
});
afterAll(() => pool.end());

async function optionsOf(table: string): Promise<Map<string, string[]>> {
  const { rows } = await pool.query<{ relname: string; reloptions: string[] | null }>(
    `SELECT c.relname, c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = $1`,
    [table],
  );
  return new Map(rows.map((r) => [r.relname, r.reloptions ?? []]));
}

it("vacuums and analyzes deliveries' and attempts' partitions at 2% of changes, those made later included", async () => {
  await new LogPartitions(pool).ensureAhead(10);
  for (const table of ["webhook_deliveries", "delivery_attempts"]) {
    const partitions = await optionsOf(table);
    expect(partitions.size).toBeGreaterThan(10);
    for (const [name, options] of partitions) {
      expect({ name, options: [...options].sort() }).toEqual({
        name,
        options: ["autovacuum_analyze_scale_factor=0.02", "autovacuum_vacuum_insert_scale_factor=0.02", "autovacuum_vacuum_scale_factor=0.02"],
      });
    }
  }
  // The deduplication records are only inserted: PostgreSQL's defaults suit them.
  for (const [name, options] of await optionsOf("webhook_events")) expect({ name, options }).toEqual({ name, options: [] });
});
