/**
 * The delivery log's statements reach the daily partitions only where they must: with 90 days of
 * partitions, a statement that joins or updates the partitioned tables without naming the days is
 * planned (and locked) against every partition on each call, which made a small batch ten times
 * dearer (docs/decisions/0017-delivery-cost-and-endpoint-drains.md, packages/db README "Sizing").
 *
 * - The hot path (the intake, the drains' claim, the group commit) reads no partition at all: the
 *   state of a delivery not yet delivered is in `delivery_states`, the intake's deduplication in
 *   `webhook_event_keys`, and the partitioned tables only get inserts (routed to their day's
 *   partition row by row). Checked on the custom plans of the statements as sent and on their
 *   generic plans (a named prepared statement may switch to one).
 * - Replay and recover's requeue reads the deliveries (and their attempts) of the days their ids
 *   name, and plans those days' partitions only.
 *
 * With the test database's partitions (yesterday to a week ahead).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import * as sql from "./log-statements.js";
import { newDeliveryId } from "./delivery-log.js";
import type { Statement } from "./sql-runner.js";

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

/** The custom plan of `statement` with `params` (what a first call plans). */
async function customPlan(statement: Statement, params: unknown[]): Promise<unknown> {
  const { rows } = await pool.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) ${statement.text}`, params);
  return rows[0]!["QUERY PLAN"];
}

/** The relations of the custom plan of `statement` with `params`. */
async function planned(statement: Statement, params: unknown[]): Promise<Set<string>> {
  return relations(await customPlan(statement, params));
}

/** `value` as an SQL literal for EXECUTE's arguments (arrays in PostgreSQL's array syntax, typed by the statement's casts). */
function literal(client: pg.PoolClient, value: unknown): string {
  if (value === null) return "NULL";
  if (Array.isArray(value)) {
    const element = (v: unknown) => (v === null ? "NULL" : `"${String(v).replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`);
    return client.escapeLiteral(`{${value.map(element).join(",")}}`);
  }
  return client.escapeLiteral(String(value));
}

/** The relations of the generic plan of `statement` (planned once for any parameters), executed with `params`. */
async function plannedGeneric(statement: Statement, params: unknown[]): Promise<Set<string>> {
  return relations(await genericPlan(statement, params));
}

/**
 * The generic plan of `statement` with `params`, in the open transaction of `client` (whose
 * plan-cache mode it sets for the rest of that transaction).
 */
async function genericPlanIn(client: pg.PoolClient, statement: Statement, params: unknown[]): Promise<unknown> {
  const name = `generic_${randomUUID().replace(/-/g, "")}`;
  await client.query("SET LOCAL plan_cache_mode = force_generic_plan");
  await client.query(`PREPARE ${name} AS ${statement.text}`);
  const { rows } = await client.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) EXECUTE ${name}${params.length === 0 ? "" : `(${params.map((p) => literal(client, p)).join(", ")})`}`);
  return rows[0]!["QUERY PLAN"];
}

/** The generic plan of `statement` (planned once for any parameters), executed with `params`. */
async function genericPlan(statement: Statement, params: unknown[]): Promise<unknown> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    return await genericPlanIn(client, statement, params);
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}

/** The custom and the generic plan of `statement` with `params`, in the open transaction of `client`. */
async function plansIn(client: pg.PoolClient, statement: Statement, params: unknown[]): Promise<unknown[]> {
  const custom = (await client.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) ${statement.text}`, params)).rows[0]!["QUERY PLAN"];
  return [custom, await genericPlanIn(client, statement, params)];
}

/** How `plan` reads `relation` whole (a sequential scan, or an index walked with no condition), as short texts. */
function wholeReads(plan: unknown, relation: string): string[] {
  const reads = nodes(plan).filter((n) => n["Relation Name"] === relation && n["Node Type"] !== "ModifyTable");
  const scans = reads.filter((n) => n["Node Type"] === "Seq Scan" || (/^Index (Only )?Scan$/.test(String(n["Node Type"])) && n["Index Cond"] === undefined));
  return scans.map((n) => JSON.stringify(n).slice(0, 300));
}

/** An organization and a world of its own, in the open transaction of `client`; the world's id. */
async function worldIn(client: pg.PoolClient): Promise<string> {
  const org = randomUUID();
  const world = randomUUID();
  await client.query(`INSERT INTO organizations (id, slug, name, updated_at) VALUES ($1, $2, 'Plans', now())`, [org, `plans-${org}`]);
  await client.query(`INSERT INTO worlds (id, organization_id, slug, name, updated_at) VALUES ($1, $2, 'plans', 'Plans', now())`, [world, org]);
  return world;
}

const partitions = (rels: Set<string>): string[] => [...rels].filter((r) => /_p\d{8}$/.test(r)).sort();
const partitionsOf = (rels: Set<string>, table: string): string[] => partitions(rels).filter((r) => r.startsWith(`${table}_p`));
const dayOf = (d: Date): string => d.toISOString().slice(0, 10).replace(/-/g, "");

const today = new Date();
const tomorrow = new Date(today.getTime() + 86_400_000);
const two = <T>(v: T): T[] => [v, v];

/** The parameters of each hot-path statement, for two deliveries of two days. */
function hotPath(): { statement: Statement; params: unknown[]; touches: string[] }[] {
  const ids = [newDeliveryId(today), newDeliveryId(tomorrow)];
  const times = [today.toISOString(), tomorrow.toISOString()];
  const world = randomUUID();
  const endpoint = randomUUID();
  const attempts = [two(null).map(() => randomUUID()), ids, two(1), two("initial"), two(today.toISOString()), two("{}"), two(200), two("{}"), two("ok"), two(false), two(3), two(null), two(null), two("delivered")];
  const deliveries = [ids, two(endpoint), two(world), two(randomUUID()), ["a", "b"], two("visitor.registered"), two("e30="), times, two(false), two(null)];
  return [
    { statement: sql.CLAIM_DUE, params: [[endpoint], [10], 30_000], touches: ["delivery_states"] },
    {
      statement: sql.RECORD_ATTEMPTS,
      params: [[endpoint], [false], [1], ...attempts, times, two(endpoint), ["delivered", "pending"], [null, tomorrow.toISOString()], two(null), two(0)],
      touches: ["delivery_states", "delivery_attempts"],
    },
    {
      statement: sql.STORE_INTAKE,
      params: [[randomUUID(), randomUUID()], two(world), ["a", "b"], two("visitor.registered"), two(today.toISOString()), today.toISOString(), ...deliveries],
      touches: ["webhook_event_keys", "webhook_events", "webhook_deliveries", "delivery_states"],
    },
    { statement: sql.INSERT_DELIVERIES, params: deliveries, touches: ["webhook_deliveries", "delivery_states"] },
    {
      statement: sql.RECORD_FINISHED,
      params: [ids, two(endpoint), two(world), two("member.connecting"), two("e30="), two(false), ["delivered", "failed"], two(today.toISOString()), times, ...attempts, times, two(endpoint)],
      touches: ["webhook_deliveries", "delivery_states", "delivery_attempts"],
    },
    { statement: sql.SKIP_DELIVERIES, params: [ids], touches: ["delivery_states"] },
    { statement: sql.RELEASE_CLAIMS, params: [ids, times], touches: ["delivery_states"] },
    { statement: sql.RENEW_CLAIMS, params: [ids, times, 60_000], touches: ["delivery_states"] },
    { statement: sql.DUE_ENDPOINTS, params: [], touches: ["delivery_states"] },
  ];
}

describe("partition pruning of the delivery log's statements", () => {
  it("has several days of partitions to choose from", async () => {
    const { rows } = await pool.query<{ table: string; n: number }>(
      `SELECT c.relname AS table, count(*)::int AS n FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent
       WHERE c.relname IN ('webhook_deliveries', 'delivery_attempts', 'webhook_events') GROUP BY 1 ORDER BY 1`,
    );
    expect(rows.map((r) => r.table)).toEqual(["delivery_attempts", "webhook_deliveries", "webhook_events"]);
    for (const row of rows) expect(row.n).toBeGreaterThanOrEqual(8);
  });

  it.each(hotPath().map((h) => [h.statement.name, h] as const))("%s (hot path) plans no daily partition, custom or generic", async (_name, { statement, params, touches }) => {
    const custom = await planned(statement, params);
    // The check sees the tables the statement works on (it reads the plan it should).
    expect([...custom]).toEqual(expect.arrayContaining(touches));
    expect(partitions(custom)).toEqual([]);
    expect(partitions(await plannedGeneric(statement, params))).toEqual([]);
  });

  // A generic plan guesses ten rows for each array of parameters, so it may join two of the
  // statement's row sets (a CTE, an unnest) in a nested loop: with a batch of thousands of
  // deliveries that is millions of comparisons per statement (seen as an intake statement taking
  // seconds once its named statement went generic). A nested loop is fine when its inner side
  // probes an index.
  it.each(hotPath().map((h) => [h.statement.name, h] as const))("%s (hot path) never loops over one of its own row sets for each row of another", async (_name, { statement, params }) => {
    for (const plan of [await customPlan(statement, params), await genericPlan(statement, params)]) {
      const loops = nodes(plan).filter((n) => n["Node Type"] === "Nested Loop");
      const unindexed = loops.filter((loop) => {
        const inner = (loop["Plans"] as Record<string, unknown>[])[1]!;
        return !nodes(inner).some((n) => /Index/.test(String(n["Node Type"])));
      });
      expect(unindexed.map((loop) => JSON.stringify(loop).slice(0, 300))).toEqual([]);
    }
  });

  // delivery_states is a queue: thousands of rows come and go each second, and what the planner
  // knows of it is whatever the last ANALYZE saw. Two moments that misled it:
  // - a backlog: one endpoint with 20,000 pending rows, analyzed. The planner guesses a tenth of
  //   them for the claim's `LIMIT w.n`, and the claim joined the rows it took with the states by
  //   hashing the whole table on every call (37 ms), the healthy endpoints' claims included;
  // - a lull: analyzed while nearly empty, then a burst of 20,000 rows. The group commit's
  //   statements, planned for an empty table, went through the table instead of probing its key,
  //   and each group commit took longer as the burst piled up (a soak's deliveries waited 40 s).
  // Every hot-path statement reads the states it works on by key, whatever the statistics say.
  describe.each([
    ["an endpoint's backlog, analyzed", "backlog"],
    ["a burst after statistics of a lull", "lull"],
  ] as const)("beside %s", (_label, moment) => {
    it.each(hotPath().filter((h) => h.statement !== sql.DUE_ENDPOINTS).map((h) => [h.statement.name, h] as const))(
      "%s reads delivery_states by key, custom or generic",
      async (_name, { statement, params }) => {
        const client = await pool.connect();
        try {
          await client.query("BEGIN");
          const world = await worldIn(client);
          const slow = randomUUID();
          await client.query(
            `INSERT INTO webhook_endpoints (id, world_id, url, format, api_version, updated_at) VALUES ($2, $1, 'https://receiver.example/', 'current', '2026-11-01', now())`,
            [world, slow],
          );
          const pile = () =>
            client.query(
              `INSERT INTO delivery_states (delivery_id, created_at, endpoint_id, status, due_at, body, updated_at)
               SELECT gen_random_uuid(), now(), $1, 'pending', now() - make_interval(secs => i / 1000.0), convert_to(repeat('x', 300), 'UTF8'), now()
               FROM generate_series(1, 20000) AS i`,
              [slow],
            );
          if (moment === "backlog") {
            await pile();
            await client.query("ANALYZE delivery_states");
          } else {
            await client.query("ANALYZE delivery_states");
            await pile();
          }
          // The claim's arrays name the backlog's endpoint beside the statement's own.
          const args = statement === sql.CLAIM_DUE ? [[slow, ...(params[0] as string[])], [40, 40], params[2]] : params;
          for (const plan of await plansIn(client, statement, args)) expect(wholeReads(plan, "delivery_states")).toEqual([]);
        } finally {
          await client.query("ROLLBACK");
          // The statistics of the rows rolled back go with them; the table's size estimate does not.
          await client.query("ANALYZE delivery_states");
          client.release();
        }
      },
    );
  });

  // webhook_endpoints grows with the deployment. Joined with a batch's rows (ten, as a generic plan
  // guesses), a thousand endpoints made the claim and the group commit's failure counters hash
  // the batch and scan every endpoint on each call; where the cost model's crossover lies moves
  // with the table, so the check runs beside a thousand endpoints more than the database holds.
  it.each(hotPath().map((h) => [h.statement.name, h] as const))(
    "%s reads webhook_endpoints by key beside a thousand endpoints, custom or generic",
    async (_name, { statement, params }) => {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const world = await worldIn(client);
        await client.query(
          `INSERT INTO webhook_endpoints (id, world_id, url, format, api_version, updated_at)
           SELECT gen_random_uuid(), $1, 'https://receiver.example/', 'current', '2026-11-01', now() FROM generate_series(1, 1000)`,
          [world],
        );
        await client.query("ANALYZE webhook_endpoints");
        for (const plan of await plansIn(client, statement, params)) expect(wholeReads(plan, "webhook_endpoints")).toEqual([]);
      } finally {
        await client.query("ROLLBACK");
        await client.query("ANALYZE webhook_endpoints");
        client.release();
      }
    },
  );

  it("the intake's deduplication is the event keys' unique index, not a search of the events' partitions", async () => {
    // No anti-join or scan over stored events: the keys' insert (ON CONFLICT DO NOTHING on their
    // primary key) is the whole check, one probe per event whatever the retention.
    const statement = hotPath().find((h) => h.statement === sql.STORE_INTAKE)!;
    const { rows } = await pool.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (FORMAT JSON) ${sql.STORE_INTAKE.text}`, statement.params);
    const all = nodes(rows[0]!["QUERY PLAN"]);
    expect(all.filter((n) => n["Join Type"] === "Anti")).toEqual([]);
    const keys = all.filter((n) => n["Relation Name"] === "webhook_event_keys");
    expect(keys.map((n) => [n["Node Type"], n["Operation"], n["Conflict Resolution"], n["Conflict Arbiter Indexes"]])).toEqual([["ModifyTable", "Insert", "NOTHING", ["webhook_event_keys_pkey"]]]);
    expect(all.filter((n) => n["Relation Name"] === "webhook_events").map((n) => n["Operation"])).toEqual(["Insert"]);
  });

  it("requeueing v7 deliveries (Replay, recover) plans their days' partitions only, of the deliveries and of their attempts", async () => {
    const ids = [newDeliveryId(today), newDeliveryId(tomorrow)];
    const times = [today.toISOString(), tomorrow.toISOString()];
    const days = [dayOf(today), dayOf(tomorrow)];
    for (const onlyStatus of ["failed", null]) {
      const rels = await planned(sql.REQUEUE, [randomUUID(), ids, times, onlyStatus]);
      expect(partitionsOf(rels, "webhook_deliveries")).toEqual(days.map((d) => `webhook_deliveries_p${d}`));
      expect(partitionsOf(rels, "delivery_attempts")).toEqual(days.map((d) => `delivery_attempts_p${d}`));
      expect(partitionsOf(rels, "webhook_events")).toEqual([]);
    }
    const one = await planned(sql.REQUEUE, [randomUUID(), [ids[0]], [times[0]], "failed"]);
    expect(partitions(one)).toEqual([`delivery_attempts_p${days[0]}`, `webhook_deliveries_p${days[0]}`]);
  });
});
