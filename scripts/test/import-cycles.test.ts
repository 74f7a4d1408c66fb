/**
 * No import circles: every TypeScript file of the packages, the services and the benchmarks is read,
 * its imports (relative ones, and `@vw/*` workspace imports through the package's `development`
 * export) resolved to files, type-only imports and re-exports included, and the graph must hold no
 * cycle. A failure names each cycle as the chain of files that closes it.
 */
import { describe, expect, it } from "@jest/globals";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SKIP = new Set(["node_modules", "dist", "generated", "coverage"]);

/** The workspace's packages: the folders holding a package.json under packages/, services/ and bench/. */
function workspaceDirs(): string[] {
  const dirs = ["packages", "services"].flatMap((top) => readdirSync(join(ROOT, top)).map((name) => join(ROOT, top, name)));
  return [...dirs, join(ROOT, "bench")].filter((dir) => existsSync(join(dir, "package.json")));
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (SKIP.has(name) || name.startsWith(".")) return [];
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|tsx|mts)$/.test(name) && !name.endsWith(".d.ts") ? [path] : [];
  });
}

interface WorkspacePackage {
  dir: string;
  exports: Record<string, unknown>;
}

const packages = new Map<string, WorkspacePackage>(
  workspaceDirs().map((dir) => {
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; exports?: unknown };
    const exports = typeof manifest.exports === "object" && manifest.exports !== null ? (manifest.exports as Record<string, unknown>) : {};
    return [manifest.name, { dir, exports }];
  }),
);

/** A path without extension (or with the `.js` that NodeNext imports carry) to the source file it names. */
function resolveFile(base: string): string | undefined {
  const stem = base.replace(/\.(js|jsx|mjs)$/, "");
  const candidates = [base, `${stem}.ts`, `${stem}.tsx`, `${stem}.mts`, join(base, "index.ts"), join(base, "index.tsx")];
  return candidates.find((c) => /\.(ts|tsx|mts)$/.test(c) && existsSync(c) && statSync(c).isFile());
}

function resolveImport(from: string, specifier: string): string | undefined {
  if (specifier.startsWith(".")) return resolveFile(resolve(dirname(from), specifier));
  const match = /^(@vw\/[^/]+)(\/.*)?$/.exec(specifier);
  if (!match) return undefined;
  const pkg = packages.get(match[1]!);
  if (!pkg) return undefined;
  const entry = pkg.exports[`.${match[2] ?? ""}`];
  const target = typeof entry === "object" && entry !== null ? (entry as Record<string, unknown>).development : undefined;
  return typeof target === "string" ? resolveFile(join(pkg.dir, target)) : undefined;
}

const files = workspaceDirs().flatMap(sources);
const graph = new Map<string, string[]>(
  files.map((file) => {
    const imported = ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles;
    const targets = imported.flatMap((i) => resolveImport(file, i.fileName) ?? []);
    return [file, [...new Set(targets)]];
  }),
);

/** Tarjan's strongly connected components: every component of more than one file is a circle. */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component);
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

const shown = (file: string): string => (file.startsWith(ROOT) ? relative(ROOT, file) : file);

/** One shortest chain inside a component, from its first file back to itself, for the message. */
function chain(graph: ReadonlyMap<string, readonly string[]>, component: string[]): string {
  const members = new Set(component);
  const start = [...component].sort()[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of graph.get(node) ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const path: string[] = [];
        for (let at = node; at !== start; at = previous.get(at)!) path.unshift(at);
        return [start, ...path, start].map(shown).join(" -> ");
      }
      if (!previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return component.map(shown).join(", ");
}

describe("imports of the workspace", () => {
  it("finds the source files and resolves workspace imports", () => {
    const contractsIndex = join(ROOT, "packages/contracts/src/index.ts");
    expect(files).toContain(contractsIndex);
    const importers = [...graph.values()].filter((targets) => targets.includes(contractsIndex));
    expect(importers.length).toBeGreaterThan(0);
  });

  it("names each circle of a graph as the chain that closes it", () => {
    const sample = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a", "d"]],
      ["d", []],
      ["e", ["e"]],
    ]);
    expect(circles(sample).map((c) => chain(sample, c)).sort()).toEqual(["a -> b -> c -> a", "e -> e"]);
  });

  it("form no circle", () => {
    expect(circles(graph).map((c) => chain(graph, c))).toEqual([]);
  });
});
