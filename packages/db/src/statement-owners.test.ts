/**
 * One owner per table, by who executes the writes: a statement module may hold SQL that another
 * table's owner wrote (a fragment composed into a statement), so where the text lives does not say
 * who runs it. This test loads every statement module of the workspace (`*-statements.ts`), reads
 * each statement's final text, finds the tables it writes, and then finds the source files that
 * run it (import it by name, or through a namespace import and use it). Each of those must be the
 * table's owner (one-writer.test.ts's OWNERS), or a co-writer named below with what it writes.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "@jest/globals";
import { OWNERS, writesOfTable } from "./one-writer.test-helper.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "../../..");

/**
 * Writes by a module that is not the table's owner, each with what it writes and why it is not a
 * call to the owner. Keep this short: an entry is a decision, not a way around the test.
 */
const CO_WRITERS: Record<string, { file: string; writes: string }[]> = {
  webhook_endpoints: [
    {
      file: "packages/db/src/delivery-log/delivery-log.ts",
      writes:
        "the consecutive-failure counter, in the attempts' group commit, with the SQL of the endpoints' owner (endpoint-statements' failureCounterUpdate): the count moves in the statement that logs the attempt",
    },
  ],
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (["node_modules", "dist", "generated", "test", "bench"].includes(name)) return [];
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|tsx|mts|mjs|js)$/.test(name) && !/\.test(-helper)?\.tsx?$/.test(name) ? [path] : [];
  });
}

const files = [...["services", "packages"].flatMap((top) => readdirSync(join(root, top)).map((pkg) => join(root, top, pkg, "src"))), join(root, "scripts")]
  .filter((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory())
  .flatMap(sources)
  .map((file) => ({ abs: file, path: relative(root, file).split("\\").join("/"), text: readFileSync(file, "utf8") }));

const statementModules = files.filter((f) => /-statements\.ts$/.test(f.path));

interface Executor {
  statement: string;
  module: string;
  file: string;
}

/** The files that run `name` of `module` (absolute path of a `-statements.ts`). */
function executorsOf(module: string, name: string): string[] {
  const spec = module.replace(/\.ts$/, "");
  return files
    .filter((file) => {
      const imports = [...file.text.matchAll(/import\s+(type\s+)?([\s\S]*?)\s+from\s+"(\.{1,2}\/[^"]+)"/g)].filter(
        (m) => !m[1] && resolve(dirname(file.abs), (m[3] as string).replace(/\.js$/, "")) === spec,
      );
      return imports.some((m) => {
        const clause = m[2] as string;
        const ns = /\*\s+as\s+(\w+)/.exec(clause)?.[1];
        if (ns) return new RegExp(`\\b${ns}\\.${name}\\b`).test(file.text);
        return new RegExp(`[{,]\\s*${name}(\\s+as\\s+\\w+)?\\s*[,}]`).test(clause);
      });
    })
    .map((file) => file.path);
}

describe("one owner per table, by who runs the statements", () => {
  it("finds the statement modules (the test reads what it should)", () => {
    expect(statementModules.map((m) => m.path)).toEqual(
      expect.arrayContaining(["packages/db/src/delivery-log/log-statements.ts", "packages/db/src/endpoints/endpoint-statements.ts"]),
    );
  });

  it("runs every statement that writes a table in that table's owner, or in a named co-writer", async () => {
    const executors = new Map<string, Executor[]>();
    for (const module of statementModules) {
      const exports = (await import(pathToFileURL(module.abs).href)) as Record<string, unknown>;
      for (const [name, value] of Object.entries(exports)) {
        const text = typeof value === "object" && value !== null && typeof (value as { text?: unknown }).text === "string" ? (value as { text: string }).text : null;
        if (text === null) continue;
        for (const table of Object.keys(OWNERS)) {
          if (!writesOfTable(table).test(text)) continue;
          for (const file of executorsOf(module.abs, name)) {
            executors.set(table, [...(executors.get(table) ?? []), { statement: name, module: module.path, file }]);
          }
        }
      }
    }
    // The delivery log's statements are run (a check that the scan sees executors at all).
    expect((executors.get("delivery_states") ?? []).map((e) => e.file)).toContain("packages/db/src/delivery-log/delivery-log.ts");

    const strangers = [...executors].flatMap(([table, list]) => {
      const owner = OWNERS[table] as string;
      const allowed = (CO_WRITERS[table] ?? []).map((c) => c.file);
      return list
        .filter((e) => !(owner.endsWith("/") ? e.file.startsWith(owner) : e.file === owner) && !allowed.includes(e.file))
        .map((e) => `${e.file} runs ${e.statement} (${e.module}), which writes ${table} (owner: ${owner})`);
    });
    expect(strangers).toEqual([]);

    // Every co-writer named still writes what it says (no stale permissions).
    const stale = Object.entries(CO_WRITERS).flatMap(([table, list]) =>
      list.filter((c) => !(executors.get(table) ?? []).some((e) => e.file === c.file)).map((c) => `${c.file} no longer writes ${table}`),
    );
    expect(stale).toEqual([]);
  });

  it("would see a stranger that runs a statement through a namespace or a named import", () => {
    const module = join(root, "packages/db/src/delivery-log/log-statements.ts");
    const fake = { abs: join(root, "services/admin-api/src/fake.ts"), path: "services/admin-api/src/fake.ts", text: 'import * as q from "../../../packages/db/src/delivery-log/log-statements.js";\nawait db.query(q.REQUEUE, []);' };
    files.push(fake);
    try {
      expect(executorsOf(module, "REQUEUE")).toContain(fake.path);
      fake.text = 'import { SKIP_DELIVERIES, REQUEUE as R } from "../../../packages/db/src/delivery-log/log-statements.js";';
      expect(executorsOf(module, "REQUEUE")).toContain(fake.path);
      expect(executorsOf(module, "RELEASE_CLAIMS")).not.toContain(fake.path);
    } finally {
      files.pop();
    }
  });
});
