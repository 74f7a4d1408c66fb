/**
 * Dependency-free helpers shared by the root scripts: where the repository is, which pnpm it pins,
 * and the environment child processes get. Must not import anything that `pnpm install` provides:
 * scripts/setup.mjs uses it on a machine where nothing is installed yet.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The one pnpm this repository runs with; keep equal to `packageManager` in package.json. */
export const PNPM_VERSION = "10.34.9";

/**
 * Fallback install location of pnpm when `npm i -g` is not possible (no write access to npm's
 * global prefix, or its bin folder not on PATH). Under .dev-data/, which git ignores.
 */
export const LOCAL_TOOLS_DIR = join(ROOT, ".dev-data", "tools");
const LOCAL_TOOLS_BIN = join(LOCAL_TOOLS_DIR, "node_modules", ".bin");

/**
 * npm passes its own configuration to scripts as `npm_config_*` (prefix=/usr, globalconfig,
 * user_agent, yes, ...) plus `npm_package_*`/`npm_lifecycle_*`; pnpm reads `npm_config_*` as its
 * own settings, so a pnpm started from an npm script would inherit npm's. Network settings are
 * the exception: a registry mirror, proxy or CA bundle given to npm is wanted by pnpm too.
 */
const KEPT_NPM_CONFIG = /^npm_config_(registry|@.*:registry|ca|cafile|cert|key|strict_ssl|proxy|https_proxy|noproxy|no_proxy)$/i;

/**
 * Returns a copy of `env` fit for spawning pnpm (or anything that may spawn pnpm): npm's script
 * variables removed, and the local pnpm fallback folder first on PATH when it exists.
 */
export function childEnv(env = process.env, extra = {}) {
  const out = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue;
    if (/^npm_/i.test(k) && !KEPT_NPM_CONFIG.test(k)) continue;
    out[k] = v;
  }
  if (existsSync(LOCAL_TOOLS_BIN)) {
    const pathKey = Object.keys(out).find((k) => k.toUpperCase() === "PATH") ?? "PATH";
    const parts = (out[pathKey] ?? "").split(delimiter).filter((p) => p && p !== LOCAL_TOOLS_BIN);
    out[pathKey] = [LOCAL_TOOLS_BIN, ...parts].join(delimiter);
  }
  return Object.assign(out, extra);
}

/**
 * Runs a command to completion. With `capture`, resolves `{code, output}` (stdout and stderr
 * interleaved) instead of streaming to this process' output. Never rejects on a non-zero exit.
 */
export function run(command, args, { cwd = ROOT, env = childEnv(), capture = false } = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: capture ? ["ignore", "pipe", "pipe"] : ["ignore", "inherit", "inherit"] });
    running.add(child);
    child.on("close", () => running.delete(child));
    let output = "";
    if (capture) {
      child.stdout.on("data", (d) => (output += d));
      child.stderr.on("data", (d) => (output += d));
    }
    child.on("error", (err) => resolve({ code: 127, output: `${output}${err.message}\n`, error: err }));
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
  });
}

/** Children of {@link run} still running. */
const running = new Set();

/**
 * Sends `signal` to every child {@link run} started that is still running: a supervisor stopped
 * during set-up (dev.mjs) must not leave a pnpm install or build behind.
 */
export function stopRunningChildren(signal = "SIGTERM") {
  for (const child of running) child.kill(signal);
}

/** Exit code a shell would report for a child killed by `signal`. */
export function signalExitCode(signal) {
  const numbers = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
  return 128 + (numbers[signal] ?? 1);
}
