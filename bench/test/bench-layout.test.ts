/**
 * The benchmarks' layout: every benchmark lives in this package and reaches the services only as
 * processes (spawnService of @vw/testing) and through public packages, never through a service's
 * modules or test harness; `pnpm bench <name>` finds each one; each ends with its goals' verdict.
 */
import { describe, expect, it } from "@jest/globals";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SRC = join(ROOT, "bench", "src");
/** The benchmarks the repository promises (`pnpm bench <name>`). */
const NAMES = ["auth-hook", "backlog", "delivery", "history", "map-storage", "members", "receivers", "recovery", "soak"];

/** Every source file of the package (.ts and .mjs), tests aside. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return /\.(ts|mjs)$/.test(e.name) && !e.name.endsWith(".test.ts") ? [path] : [];
  });
}

/** The module specifiers a file imports (static and dynamic). */
function specifiers(text: string): string[] {
  return [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"']+)["']/g)].map((m) => m[1]!);
}

const benches = readdirSync(SRC).filter((f) => f.endsWith(".bench.ts"));
const serviceNames = readdirSync(join(ROOT, "services"));
const servicePackages = serviceNames.map((name) => `@vw/${name}`);

describe("bench package", () => {
  it("holds every benchmark, and no service holds one", () => {
    expect(benches.map((f) => f.replace(/\.bench\.ts$/, "")).sort()).toEqual(NAMES);
    const strays = serviceNames.flatMap((name) => {
      const dir = join(ROOT, "services", name, "bench");
      return existsSync(dir) ? readdirSync(dir).map((f) => `services/${name}/bench/${f}`) : [];
    });
    expect(strays).toEqual([]);
  });

  it("imports no service's modules: only packages and its own files", () => {
    const offending: string[] = [];
    for (const file of sources(SRC)) {
      for (const spec of specifiers(readFileSync(file, "utf8"))) {
        const outside = spec.startsWith(".") && relative(join(ROOT, "bench"), resolve(dirname(file), spec)).startsWith("..");
        if (outside || servicePackages.some((pkg) => spec === pkg || spec.startsWith(`${pkg}/`)) || /(^|\/)services\//.test(spec)) {
          offending.push(`${relative(ROOT, file)} imports ${spec}`);
        }
      }
    }
    expect(offending).toEqual([]);
  });

  it.each(benches)("%s states its goals and ends with their tally", (file) => {
    const text = readFileSync(join(SRC, file), "utf8");
    expect(text).toContain("(goal ");
    expect(text).toContain("new GoalTally()");
    expect(text).toMatch(/goals\.judge\(/);
    expect(text).toMatch(/goals\.summary\(\)/);
  });

  it("runs the delivery benchmark's Cluster comparison (BENCH_REDIS=cluster) with its own goals and tally", () => {
    const delivery = readFileSync(join(SRC, "delivery.bench.ts"), "utf8");
    expect(delivery).toContain('import("./lib/delivery-cluster.js")');
    const comparison = readFileSync(join(SRC, "lib", "delivery-cluster.ts"), "utf8");
    for (const goal of ["(goal >= 90%)", "(goal <= 1.1x)", "(goal <= 45%)"]) expect(comparison).toContain(goal);
    expect(comparison).toContain("new GoalTally()");
    expect(comparison).toMatch(/goals\.summary\(\)/);
  });

  it.each([
    ["map-storage", "cluster", "BENCH_REDIS=cluster: map-storage does not start a Cluster of its own (pnpm bench delivery does)"],
    ["delivery", "sentinel", 'BENCH_REDIS must be unset or "cluster", not "sentinel"'],
  ])("refuses BENCH_REDIS for %s set to %s before it starts anything", (name, value, message) => {
    const run = spawnSync(process.execPath, [join(ROOT, "scripts", "bench.mjs"), name], { cwd: ROOT, encoding: "utf8", env: { ...process.env, BENCH_REDIS: value } });
    expect([run.status, run.stderr.trim()]).toEqual([2, `[bench] ${message}`]);
  });

  it("is what `pnpm bench` lists and runs", () => {
    const listed = spawnSync(process.execPath, [join(ROOT, "scripts", "bench.mjs")], { cwd: ROOT, encoding: "utf8" });
    expect(listed.status).toBe(2);
    for (const name of NAMES) expect(listed.stderr).toContain(`bench/src/${name}.bench.ts`);
  });
});
