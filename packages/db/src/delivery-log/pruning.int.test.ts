/**
 * The worker's two statements on the log, and the requeue of Replay and recover, prune to the
 * partitions of the days they touch when PostgreSQL plans them: with 90 days of partitions, a
 * statement whose rows come from an `unnest` alone is planned (and locked) against every partition
 * on each call, which made a small batch ten times dearer (packages/db README, "Sizing"). Checked on the plans PostgreSQL makes for the
 * statements as they are sent, with the test database's partitions (yesterday to a week ahead).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import * as sql from "./log-statements.js";
import { newDeliveryId } from "./delivery-log.js";

let pool: pg.Pool;

beforeAll(() => {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error("DATABASE_URL is not set: run through jest (test/global-setup.js)");
  pool = new pg.Pool({ connectionString: url, max: 1 });
});
afterAll(async () => {
  await pool.end();
});

/** Every plan node, depth first, from EXPLAIN's JSON. */
function nodes(plan: unknown, out: Record<string, unknown>[] = []): Record<string, unknown>[] {
  if (Array.isArray(plan)) for (const p of plan) nodes(p, out);
  else if (plan && typeof plan === "object") {
    const node = plan as Record<string, unknown>;
    if (typeof node["Node Type"] === "string") out.push(node);
    for (const v of Object.values(node)) if (v && typeof v === "object") nodes(v, out);
  }
  return out;
}

/** The relations a plan reads or writes. */
function relations(plan: unknown): Set<string> {
  return new Set(nodes(plan).flatMap((n) => (typeof n["Relation Name"] === "string" ? [n["Relation Name"]] : [])));
}

async function planned(statement: string, params: unknown[]): Promise<Set<string>> {
  const { rows } = await pool.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) ${statement}`, params);
  return relations(rows[0]!["QUERY PLAN"]);
}

const partitionsOf = (rels: Set<string>, table: string): string[] => [...rels].filter((r) => r.startsWith(`${table}_p`)).sort();

describe("partition pruning of the worker's statements", () => {
  it("has several days of partitions to choose from", async () => {
    const { rows } = await pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent WHERE c.relname = 'webhook_deliveries'",
    );
    expect(rows[0]!.n).toBeGreaterThanOrEqual(8);
  });

  it("loading deliveries created today plans today's partition only", async () => {
    const now = new Date();
    const ids = [newDeliveryId(now), newDeliveryId(now)];
    const rels = await planned(sql.LOAD_TIMED.text, [ids, [now.toISOString(), now.toISOString()]]);
    const day = now.toISOString().slice(0, 10).replace(/-/g, "");
    expect(partitionsOf(rels, "webhook_deliveries")).toEqual([`webhook_deliveries_p${day}`]);
  });

  it("recording attempts updates only the partitions of the deliveries' days", async () => {
    const today = new Date();
    const tomorrow = new Date(today.getTime() + 86_400_000);
    const ids = [newDeliveryId(today), newDeliveryId(tomorrow)];
    const times = [today.toISOString(), tomorrow.toISOString()];
    const two = <T>(v: T): T[] => [v, v];
    const params: unknown[] = [
      [], [], [], // counters
      two(randomUUID()).map(() => randomUUID()), ids, two(1), two("initial"), two(today.toISOString()), two("{}"), two(200), two("{}"), two("ok"), two(false), two(3), two(null), two(null), two("delivered"),
      times, two(randomUUID()), two("delivered"), two(null),
    ];
    const rels = await planned(sql.RECORD_ATTEMPTS.text, params);
    const day = (d: Date) => d.toISOString().slice(0, 10).replace(/-/g, "");
    expect(partitionsOf(rels, "webhook_deliveries")).toEqual([`webhook_deliveries_p${day(today)}`, `webhook_deliveries_p${day(tomorrow)}`]);
  });

  it("requeueing v7 deliveries (Replay, recover) plans their days' partitions only", async () => {
    const today = new Date();
    const ids = [newDeliveryId(today)];
    const rels = await planned(sql.REQUEUE_TIMED.text, [randomUUID(), ids, [today.toISOString()], "failed"]);
    expect(partitionsOf(rels, "webhook_deliveries")).toEqual([`webhook_deliveries_p${today.toISOString().slice(0, 10).replace(/-/g, "")}`]);
    const restore = await planned(sql.RESTORE_TIMED.text, [ids, [today.toISOString()], [today.toISOString()], ["failed"], [null], [today.toISOString()], [0], [0]]);
    expect(partitionsOf(restore, "webhook_deliveries")).toEqual([`webhook_deliveries_p${today.toISOString().slice(0, 10).replace(/-/g, "")}`]);
  });
});

describe("the intake's duplicate check", () => {
  it("probes each events partition's (world, producer id) index per event, on the generic plan the intake runs", async () => {
    // The intake's transaction runs generic plans (RESOLVE_AND_LOCK_EVENTS). A generic plan is made once per
    // connection; one made while the partitions looked small hashed every stored event on each
    // intake, until an ANALYZE made PostgreSQL plan again. The check must be a per-event subplan
    // over indexes whatever the tables' sizes, never a join over their rows.
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SET LOCAL plan_cache_mode = force_generic_plan");
      const name = `intake_${randomUUID().replace(/-/g, "")}`;
      const types = "uuid[], uuid[], text[], text[], timestamptz[], timestamptz, uuid[], uuid[], uuid[], uuid[], text[], text[], text[], timestamptz[], bool[]";
      await client.query(`PREPARE ${name}(${types}) AS ${sql.INSERT_EVENTS_AND_DELIVERIES.text}`);
      const now = new Date().toISOString();
      const world = randomUUID();
      // EXPLAIN takes no bound parameters: the arguments are literals.
      const array = (values: string[], type: string) => `ARRAY[${values.map((v) => client.escapeLiteral(v)).join(", ")}]::${type}[]`;
      const args = [
        array([randomUUID(), randomUUID()], "uuid"),
        array([world, world], "uuid"),
        array(["a", "b"], "text"),
        array(["visitor.registered", "visitor.registered"], "text"),
        array([now, now], "timestamptz"),
        `${client.escapeLiteral(now)}::timestamptz`,
        // One delivery per event.
        array([randomUUID(), randomUUID()], "uuid"),
        array([randomUUID(), randomUUID()], "uuid"),
        array([world, world], "uuid"),
        array([randomUUID(), randomUUID()], "uuid"),
        array(["a", "b"], "text"),
        array(["visitor.registered", "visitor.registered"], "text"),
        array(["e30=", "e30="], "text"),
        array([now, now], "timestamptz"),
        "ARRAY[false, false]::bool[]",
      ];
      const { rows } = await client.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) EXECUTE ${name}(${args.join(", ")})`);
      const all = nodes(rows[0]!["QUERY PLAN"]);
      const onEvents = all.filter((n) => typeof n["Relation Name"] === "string" && (n["Relation Name"] as string).startsWith("webhook_events_p") && n["Node Type"] !== "ModifyTable");
      expect(all.filter((n) => n["Join Type"] === "Anti")).toEqual([]);
      expect(onEvents.length).toBeGreaterThanOrEqual(8);
      expect(new Set(onEvents.map((n) => `${n["Node Type"]} ${n["Parent Relationship"] ?? ""}`.trim()))).toEqual(new Set(["Index Only Scan Member"]));
      expect(onEvents.every((n) => String(n["Index Name"]).endsWith("_world_id_producer_id_idx"))).toBe(true);
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  });
});
