/**
 * Which workspace packages need `pnpm build`, so that a warm `npm run dev` or `npm test` with no
 * change skips the build (about 15-20 s on a 2-core machine) instead of recompiling everything.
 *
 * A package's fingerprint covers the files its build reads: everything in its folder except
 * node_modules, its outputs (dist, generated code) and what the build never compiles (tests,
 * benches, docs), plus the root files every build depends on (lockfile, base tsconfig, root
 * package.json). The fingerprints of the last successful build are kept in
 * `.dev-data/build-state.json`. A changed package is rebuilt with everything that depends on it
 * (pnpm's `--filter ...<name>`), since its emitted types may have changed.
 *
 * Dependency-free (node built-ins only): setup runs it before anything is installed.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { ROOT } from "./toolchain.mjs";

const STATE_FILE = join(ROOT, ".dev-data", "build-state.json");
/** Folders under the workspace roots (pnpm-workspace.yaml: services/*, packages/*). */
const WORKSPACE_ROOTS = ["services", "packages"];
const ROOT_INPUTS = ["pnpm-lock.yaml", "tsconfig.base.json", "package.json", "pnpm-workspace.yaml"];
const SKIPPED_DIRS = new Set(["node_modules", "dist", "generated", "test", "bench", "coverage", "artifacts", ".turbo"]);
const SKIPPED_FILE = /(\.test\.tsx?|\.md|\.tsbuildinfo)$/;

/** Workspace packages that have a build script: `{name, dir, outDir}`. */
export function buildablePackages() {
  const found = [];
  for (const root of WORKSPACE_ROOTS) {
    const base = join(ROOT, root);
    if (!existsSync(base)) continue;
    for (const entry of readdirSync(base, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const dir = join(base, entry.name);
      const manifest = join(dir, "package.json");
      if (!existsSync(manifest)) continue;
      const pkg = JSON.parse(readFileSync(manifest, "utf8"));
      if (pkg.scripts?.build) found.push({ name: pkg.name, dir, outDir: join(dir, "dist") });
    }
  }
  return found.sort((a, b) => a.dir.localeCompare(b.dir));
}

function walk(dir, out) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name) && !entry.name.startsWith(".")) walk(join(dir, entry.name), out);
    } else if (entry.isFile() && !SKIPPED_FILE.test(entry.name)) {
      out.push(join(dir, entry.name));
    }
  }
  return out;
}

/** Hash of (path, size, mtime) of every input file of the package and of the root inputs. */
export function fingerprint(pkg) {
  const hash = createHash("sha256");
  const files = [...ROOT_INPUTS.map((f) => join(ROOT, f)).filter(existsSync), ...walk(pkg.dir, []).sort()];
  for (const file of files) {
    const st = statSync(file);
    hash.update(`${relative(ROOT, file)}\0${st.size}\0${st.mtimeMs}\n`);
  }
  return hash.digest("hex");
}

function readState() {
  try {
    return JSON.parse(readFileSync(STATE_FILE, "utf8"));
  } catch {
    return {};
  }
}

/**
 * The build to do: every buildable package with its fingerprint taken now (before building, so
 * that a file saved during the build makes the next run build again), and the stale ones: inputs
 * changed since the last successful build, or output gone.
 */
export function planBuild(packages = buildablePackages()) {
  const state = readState();
  const fingerprints = Object.fromEntries(packages.map((pkg) => [pkg.name, fingerprint(pkg)]));
  const stale = packages.filter((pkg) => !existsSync(pkg.outDir) || state[pkg.name] !== fingerprints[pkg.name]);
  return { packages, stale, fingerprints };
}

/** Records a plan's fingerprints once its build succeeded. */
export function recordBuilt(plan) {
  const state = { ...readState(), ...plan.fingerprints };
  mkdirSync(join(ROOT, ".dev-data"), { recursive: true });
  writeFileSync(STATE_FILE, `${JSON.stringify(state, null, 2)}\n`);
}
