/**
 * The dashboard's shape, without a browser: what it ships (the JavaScript of the build stays under
 * its gzip budget) and how its modules depend on each other (no import cycle: screens reach the
 * router and shared pieces, only the shell reaches the screens).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "@jest/globals";
import { DASHBOARD_ASSETS_DIR } from "@vw/dashboard/assets-dir";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "..", "src");
/** The budget of the page's JavaScript, gzipped (kB of 1000 bytes, as Vite reports sizes). */
const JS_GZIP_BUDGET_BYTES = 110_000;

describe("the build", () => {
  it(`ships JavaScript under ${JS_GZIP_BUDGET_BYTES / 1000} kB gzip, all of it loaded by index.html`, () => {
    const index = join(DASHBOARD_ASSETS_DIR, "index.html");
    if (!existsSync(index)) throw new Error(`${index} is missing: run \`pnpm build\` (or \`npm run setup\`) first`);
    const assets = join(DASHBOARD_ASSETS_DIR, "assets");
    const scripts = readdirSync(assets).filter((f) => f.endsWith(".js"));
    expect(scripts.length).toBeGreaterThan(0);
    // Level 9, as Vite's own report: the figure the README quotes.
    const gzipped = scripts.reduce((n, f) => n + gzipSync(readFileSync(join(assets, f)), { level: 9 }).length, 0);
    expect({ gzipped, withinBudget: gzipped < JS_GZIP_BUDGET_BYTES }).toEqual({ gzipped, withinBudget: true });
    const html = readFileSync(index, "utf8");
    for (const f of scripts) expect(html).toContain(`/dashboard/assets/${f}`);
  });
});

/** Every module under src and the local modules it imports (`import`/`export ... from`, side-effect imports; assets left out). */
function importGraph(): Map<string, string[]> {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.tsx?$/.test(name)) files.push(path);
    }
  };
  walk(SRC);
  const resolveLocal = (from: string, spec: string): string => {
    const base = resolve(dirname(from), spec).replace(/\.js$/, "");
    const found = [".ts", ".tsx", "/index.ts", "/index.tsx"].map((ext) => base + ext).find((p) => existsSync(p));
    if (!found) throw new Error(`${relative(SRC, from)} imports ${spec}, which is not a module under src`);
    return found;
  };
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    const specs = [...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"(\.[^"]+)"|^\s*import\s+"(\.[^"]+)"/gm)].map((m) => (m[1] ?? m[2])!);
    // Stylesheets and images are assets, not modules that could import back.
    const modules = specs.filter((s) => !/\.(css|svg|png)$/.test(s));
    graph.set(relative(SRC, file), modules.map((s) => relative(SRC, resolveLocal(file, s))));
  }
  return graph;
}

/** The import cycles of a graph, each as the path that closes it (`a -> b -> a`). */
function cycles(graph: Map<string, string[]>): string[] {
  const found: string[] = [];
  const state = new Map<string, "open" | "done">();
  const visit = (node: string, path: string[]) => {
    state.set(node, "open");
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") found.push([...path.slice(path.indexOf(next)), next].join(" -> "));
      else if (state.get(next) === undefined) visit(next, [...path, next]);
    }
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (state.get(node) === undefined) visit(node, [node]);
  return found;
}

describe("the modules", () => {
  const graph = importGraph();

  it("import each other without a cycle", () => {
    expect(cycles(graph)).toEqual([]);
  });

  it("are all seen: the shell imports every screen, the screens link through the router", () => {
    const screens = [...graph.keys()].filter((f) => f.endsWith(".screen.tsx"));
    expect(screens.length).toBeGreaterThanOrEqual(7);
    expect(graph.get("shell.tsx")).toEqual(expect.arrayContaining(screens));
    expect(graph.get("screens/overview.screen.tsx")).toContain("router.ts");
  });

  it("would report a cycle", () => {
    const looped = new Map(graph);
    looped.set("router.ts", [...(graph.get("router.ts") ?? []), "shell.tsx"]);
    expect(cycles(looped)).toEqual([expect.stringMatching(/^router\.ts -> shell\.tsx -> .*router\.ts$|^shell\.tsx -> .*router\.ts -> shell\.tsx$/)]);
  });
});
