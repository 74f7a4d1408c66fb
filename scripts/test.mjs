#!/usr/bin/env node
/**
 * `pnpm test` (after setup): installs Debian's Chromium and tinyproxy when missing
 * (scripts/lib/test-tools.mjs: the dashboard's browser tests, the delivery proxy tests), then
 * runs jest once for the whole workspace, in ESM mode (`--experimental-vm-modules` appended to
 * NODE_OPTIONS), with the CLI arguments passed through.
 * jest's own reporter output is unchanged; after it comes one line `N passed, N failed` read from
 * jest's JSON results, which CI parses. Exits with jest's exit code.
 *
 * Counting: `passed`/`failed` are tests; a test file that failed to run at all (a syntax error,
 * an import that throws) adds 1 to `failed`, and a run that produced no results (the global setup
 * failed, say) prints `0 passed, 1 failed`.
 *
 * The whole suite (no test path given) is preceded by the type-aware lint of every package
 * (eslint.config.js: promises nobody observes or that are handed where a value is expected); a lint
 * error adds 1 to `failed` and makes the exit code non-zero, though jest still runs. `VW_LINT=0`
 * skips it (CI's second run on another Node: the lint does not depend on the runtime).
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureTestTools } from "./lib/test-tools.mjs";
import { ROOT, childEnv, signalExitCode } from "./lib/toolchain.mjs";
import { randomBytes } from "node:crypto";

const jestBin = join(ROOT, "node_modules", "jest", "bin", "jest.js");
if (!existsSync(jestBin)) {
  console.error("[test] jest is not installed: run `npm run setup` (or `npm test`, which runs it first)");
  process.exit(1);
}

const userArgs = process.argv.slice(2);

// The browser and proxy tests fail, never skip, without their programs: get them first, or say why not.
const toolsProblem = await ensureTestTools();
if (toolsProblem) console.error(`[test] ${toolsProblem}`);
// Runs that list or print rather than test produce no results file, so get no summary line.
const noResults = userArgs.some((a) => /^--(help|version|listTests|showConfig|clearCache|init)$/.test(a) || a === "-h" || a === "-v");
const resultsFile = join(tmpdir(), `vw-jest-results-${process.pid}-${randomBytes(4).toString("hex")}.json`);
const args = noResults ? userArgs : [...userArgs, "--json", `--outputFile=${resultsFile}`];

const nodeOptions = (process.env.NODE_OPTIONS ?? "").split(/\s+/).filter(Boolean);
if (!nodeOptions.includes("--experimental-vm-modules")) nodeOptions.push("--experimental-vm-modules");
// The flag is the supported way to run jest on ESM; its warning on every run is noise.
if (!nodeOptions.some((o) => o.startsWith("--disable-warning"))) nodeOptions.push("--disable-warning=ExperimentalWarning");

const lintFailed = userArgs.some((a) => !a.startsWith("-")) || process.env.VW_LINT === "0" || noResults ? false : await lint();

const child = spawn(process.execPath, [jestBin, ...args], {
  cwd: ROOT,
  env: childEnv(process.env, { NODE_OPTIONS: nodeOptions.join(" ") }),
  stdio: ["inherit", "inherit", "inherit"],
});

// Ctrl+C reaches jest directly (same process group); a SIGTERM sent to this script alone is passed on.
let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    interrupted = true;
    if (child.exitCode === null) child.kill(signal);
  });
}

child.on("error", (err) => {
  console.error(`[test] could not start jest: ${err.message}`);
  process.exit(1);
});

child.on("close", (code, signal) => {
  const jestExit = code ?? signalExitCode(signal);
  const exitCode = jestExit === 0 && lintFailed ? 1 : jestExit;
  if (!noResults) console.log(summaryLine(jestExit, lintFailed ? 1 : 0));
  rmSync(resultsFile, { force: true });
  process.exit(interrupted && exitCode === 0 ? 130 : exitCode);
});

/** Runs eslint over the workspace; resolves true when it reported an error (or could not run). */
function lint() {
  const eslintBin = join(ROOT, "node_modules", "eslint", "bin", "eslint.js");
  console.log("[test] lint: eslint (type-aware) over every package");
  return new Promise((resolve) => {
    const started = Date.now();
    const run = spawn(process.execPath, [eslintBin, "--max-warnings=0", "."], { cwd: ROOT, env: childEnv(process.env, {}), stdio: "inherit" });
    run.on("error", (err) => {
      console.error(`[test] lint could not run: ${err.message}`);
      resolve(true);
    });
    run.on("close", (code) => {
      console.log(`[test] lint ${code === 0 ? "clean" : "FAILED (counted as 1 failure)"} in ${Math.round((Date.now() - started) / 1000)} s`);
      resolve(code !== 0);
    });
  });
}

function summaryLine(exitCode, extraFailures = 0) {
  let results;
  try {
    results = JSON.parse(readFileSync(resultsFile, "utf8"));
  } catch {
    console.log(`[test] jest wrote no results (exit code ${exitCode}); counting the run as 1 failure`);
    return "0 passed, 1 failed";
  }
  const passed = results.numPassedTests ?? 0;
  const brokenFiles = results.numRuntimeErrorTestSuites ?? 0;
  if (brokenFiles > 0) console.log(`[test] ${brokenFiles} test file(s) failed to run; each counts as 1 failure`);
  return `${passed} passed, ${(results.numFailedTests ?? 0) + brokenFiles + extraFailures} failed`;
}
