/**
 * One owner per table: every table of the Prisma schema (the delivery log's daily partitions
 * included) names the one module that writes it, and no other source file of the workspace
 * inserts, updates, deletes or copies its rows, in SQL or through Prisma's model methods (nested
 * writes through a relation included). Everyone else calls the owner. Tests and benchmarks may
 * seed rows; they are not scanned.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "@jest/globals";
import { OWNERS, writesOfTable } from "./one-writer.test-helper.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "../../..");

/** Prisma's write methods on a model (`prisma.<model>.<method>(`). */
const MODEL_WRITES = "create|createMany|createManyAndReturn|update|updateMany|updateManyAndReturn|upsert|delete|deleteMany";
/** Prisma's nested writes through a relation field (`<field>: { <operation>`); `connect` writes no row of it. */
const NESTED_WRITES = "create|createMany|connectOrCreate|upsert|update|updateMany|delete|deleteMany|set";

interface Table {
  name: string;
  /** Prisma's accessor of its model (`prisma.webhookEndpoint`). */
  accessor: string;
  /** Relation fields of other models that lead to it. */
  relationFields: string[];
}

/** The tables of the schema, with how Prisma reaches each. */
function schemaTables(): Table[] {
  const schema = readFileSync(join(here, "../prisma/schema.prisma"), "utf8");
  const models = [...schema.matchAll(/^model\s+(\w+)\s*\{([\s\S]*?)^\}/gm)].map(([, model, body]) => ({
    model: model as string,
    table: /@@map\("([^"]+)"\)/.exec(body as string)?.[1] ?? (model as string),
    body: body as string,
  }));
  return models.map(({ model, table }) => ({
    name: table,
    accessor: model.charAt(0).toLowerCase() + model.slice(1),
    relationFields: models.flatMap(({ body }) => [...body.matchAll(new RegExp(`^\\s+(\\w+)\\s+${model}(\\[\\]|\\?)?\\s`, "gm"))].map((m) => m[1] as string)),
  }));
}

/** What counts as writing `table`: SQL on it or on one of its daily partitions, or Prisma's writes. */
function writesOf(table: Table): RegExp[] {
  return [
    writesOfTable(table.name),
    new RegExp(`\\.${table.accessor}\\.(${MODEL_WRITES})\\(`),
    ...table.relationFields.map((field) => new RegExp(`\\b${field}\\s*:\\s*\\{\\s*(${NESTED_WRITES})\\s*:`)),
  ];
}

/** Source files of every package and service (and the scripts), tests left out. */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (["node_modules", "dist", "generated", "test", "bench"].includes(name)) return [];
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|tsx|mts|mjs|js)$/.test(name) && !/\.test\.tsx?$/.test(name) ? [path] : [];
  });
}

const files = [
  ...["services", "packages"].flatMap((top) => readdirSync(join(root, top)).map((pkg) => join(root, top, pkg, "src"))),
  join(root, "scripts"),
]
  .filter((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory())
  .flatMap(sources)
  .map((file) => ({ path: relative(root, file).split("\\").join("/"), text: readFileSync(file, "utf8") }));

const tables = schemaTables();

describe("one owner per table", () => {
  it("names an owner for every table of the schema, and only for those", () => {
    expect(tables.map((t) => t.name).sort()).toEqual(Object.keys(OWNERS).sort());
  });

  it("finds every owner where it says", () => {
    expect(Object.values(OWNERS).filter((owner) => !statSync(join(root, owner), { throwIfNoEntry: false }))).toEqual([]);
  });

  it.each(tables.map((t) => [t.name, t] as const))("%s is written by its owner alone", (_name, table) => {
    const owner = OWNERS[table.name] as string;
    const writes = writesOf(table);
    const writers = files.filter((file) => writes.some((re) => re.test(file.text))).map((file) => file.path);
    const others = writers.filter((path) => (owner.endsWith("/") ? !path.startsWith(owner) : path !== owner));
    expect(others).toEqual([]);
  });

  it("finds the delivery log's writes of the tables beside its partitions (states, event keys, the stats rollup) in the delivery log alone", () => {
    // A pattern that missed these statements would let the ownership pass on no writer at all.
    const byName = new Map(tables.map((t) => [t.name, t]));
    for (const name of ["delivery_states", "webhook_event_keys", "endpoint_stats"]) {
      expect({ name, owner: OWNERS[name] }).toEqual({ name, owner: "packages/db/src/delivery-log/" });
      const writes = writesOf(byName.get(name) as Table);
      const writers = files.filter((file) => writes.some((re) => re.test(file.text))).map((file) => file.path);
      expect({ name, writers: writers.filter((path) => path.startsWith("packages/db/src/delivery-log/")).length > 0 }).toEqual({ name, writers: true });
    }
    const hit = (name: string, text: string) => writesOf(byName.get(name) as Table).some((re) => re.test(text));
    expect(hit("endpoint_stats", "INSERT INTO endpoint_stats AS s (endpoint_id, bucket)")).toBe(true);
    expect(hit("delivery_states", "DELETE FROM delivery_states s USING t")).toBe(true);
    expect(hit("delivery_states", "UPDATE delivery_states s SET claimed_until = now()")).toBe(true);
    expect(hit("webhook_event_keys", "INSERT INTO webhook_event_keys (world_id, producer_id, created_at)")).toBe(true);
    expect(hit("delivery_states", "await tx.deliveryState.deleteMany({ where })")).toBe(true);
    expect(hit("delivery_states", "SELECT s.delivery_id FROM delivery_states s FOR UPDATE SKIP LOCKED")).toBe(false);
  });

  it("would see a second writer (the patterns match what writers write)", () => {
    const byName = new Map(tables.map((t) => [t.name, t]));
    const endpoints = writesOf(byName.get("webhook_endpoints") as Table);
    const deliveries = writesOf(byName.get("webhook_deliveries") as Table);
    const keys = writesOf(byName.get("api_keys") as Table);
    const hit = (patterns: RegExp[], text: string) => patterns.some((re) => re.test(text));
    expect(hit(endpoints, "tx.$queryRaw`\n  UPDATE webhook_endpoints\n  SET enabled = false`")).toBe(true);
    expect(hit(endpoints, "await tx.webhookEndpoint.updateMany({ where })")).toBe(true);
    expect(hit(endpoints, "prisma.world.update({ data: { webhookEndpoints: { create: [] } } })")).toBe(true);
    expect(hit(deliveries, 'COPY "webhook_deliveries_p20260101" FROM STDIN')).toBe(true);
    expect(hit(deliveries, "delete from webhook_deliveries where id = $1")).toBe(true);
    expect(hit(keys, "this.prisma.apiKey.update({ where: { id }, data: { lastUsedAt } })")).toBe(true);
    // Reads and locks are not writes.
    expect(hit(endpoints, "SELECT id FROM webhook_endpoints WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE")).toBe(false);
    expect(hit(endpoints, "prisma.webhookEndpoint.findMany({ where })")).toBe(false);
    expect(hit(deliveries, "SELECT * FROM webhook_deliveries d WHERE d.status = 'pending' FOR UPDATE OF d")).toBe(false);
  });
});
