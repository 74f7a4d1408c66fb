/**
 * The set-up shared by `npm run setup`, `npm run dev` and `npm test`: brings a checkout to a
 * runnable state on a machine that has only Node and npm.
 *   1. pnpm, exactly PNPM_VERSION: `npm i -g pnpm@<version>` when missing or different, falling
 *      back to a repository-local install under .dev-data/tools when the global one is not usable;
 *   2. `pnpm install` (`--frozen-lockfile` when CI=true);
 *   3. `pnpm build` of what changed since the last successful build (build-state.mjs); everything
 *      when CI=true or SETUP_FULL_BUILD=1.
 * Needs nothing from node_modules, so it can run before anything is installed.
 */
import { planBuild, recordBuilt } from "./build-state.mjs";
import { LOCAL_TOOLS_DIR, PNPM_VERSION, ROOT, run } from "./toolchain.mjs";

const log = (msg) => console.log(`[setup] ${msg}`);
const seconds = (since) => `${((performance.now() - since) / 1000).toFixed(1)}s`;

function fail(msg) {
  console.error(`[setup] FAILED: ${msg}`);
  process.exit(1);
}

/** The version printed by the `pnpm` that PATH (as children see it) resolves, or null. */
async function pnpmVersion() {
  const { code, output } = await run("pnpm", ["--version"], { capture: true });
  return code === 0 ? output.trim().split("\n").pop().trim() : null;
}

// npm gets the environment as it is: npm_config_* (prefix, registry...) are npm's own settings.
const npmOptions = { capture: true, env: process.env };

async function ensurePnpm() {
  const found = await pnpmVersion();
  if (found === PNPM_VERSION) return log(`pnpm ${PNPM_VERSION} found`);

  log(`${found ? `pnpm ${found} found` : "pnpm not found"}; installing pnpm@${PNPM_VERSION}: npm i -g pnpm@${PNPM_VERSION}`);
  const global = await run("npm", ["install", "--global", "--no-audit", "--no-fund", `pnpm@${PNPM_VERSION}`], npmOptions);
  if (global.code === 0 && (await pnpmVersion()) === PNPM_VERSION) return log(`pnpm ${PNPM_VERSION} installed globally`);

  // EACCES on npm's prefix, its bin folder not on PATH, or another pnpm earlier on PATH (a
  // corepack shim, say): install into the repository and put it first on PATH for our children.
  log(
    global.code === 0
      ? `the global pnpm is not the one on PATH; installing it under ${LOCAL_TOOLS_DIR} instead`
      : `global install failed: ${firstError(global.output)}; installing under ${LOCAL_TOOLS_DIR} instead`,
  );
  const local = await run(
    "npm",
    ["install", "--prefix", LOCAL_TOOLS_DIR, "--no-save", "--no-package-lock", "--no-audit", "--no-fund", `pnpm@${PNPM_VERSION}`],
    npmOptions,
  );
  if (local.code !== 0) fail(`could not install pnpm@${PNPM_VERSION}:\n${global.output}\n${local.output}`);
  const version = await pnpmVersion();
  if (version !== PNPM_VERSION) fail(`pnpm ${PNPM_VERSION} was installed but \`pnpm --version\` prints ${version ?? "nothing"}`);
  log(`pnpm ${PNPM_VERSION} installed in ${LOCAL_TOOLS_DIR}/node_modules/.bin (the root scripts find it there; add it to PATH to type pnpm yourself)`);
}

/** npm's first error line ("npm error code EACCES"), the most telling one. */
function firstError(text) {
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  return lines.find((l) => /error/i.test(l) && !/complete log/i.test(l)) ?? lines.pop() ?? "no output";
}

async function step(label, args) {
  const t = performance.now();
  log(`${label}: pnpm ${args.join(" ")}`);
  const { code } = await run("pnpm", args);
  if (code !== 0) fail(`pnpm ${args.join(" ")} exited with ${code}`);
  log(`${label} done in ${seconds(t)}`);
}

/**
 * Runs the three steps; exits the process with a message on failure. `env` is the environment
 * whose CI and SETUP_FULL_BUILD are honoured (the caller's process.env).
 */
export async function setupWorkspace(env = process.env) {
  const started = performance.now();
  const ci = /^(1|true)$/i.test(env.CI ?? "");
  await ensurePnpm();
  // confirmModulesPurge=false: when node_modules was made by other settings pnpm asks before
  // recreating it, which fails without a TTY (CI, no stdin); recreating it is what we want.
  await step("install", ["install", ...(ci ? ["--frozen-lockfile"] : []), "--config.confirmModulesPurge=false"]);
  await build(ci || /^(1|true)$/i.test(env.SETUP_FULL_BUILD ?? ""));
  log(`ready in ${seconds(started)} (${ROOT})`);
}

/** `pnpm build`, limited to the stale packages and their dependents unless `full`. */
async function build(full) {
  const plan = planBuild();
  if (full || plan.stale.length === plan.packages.length) {
    await step("build", ["run", "build"]);
  } else if (plan.stale.length === 0) {
    log(`build: all ${plan.packages.length} packages up to date, nothing to compile (SETUP_FULL_BUILD=1 forces it)`);
    return;
  } else {
    const filters = plan.stale.flatMap((pkg) => ["--filter", `...${pkg.name}`]);
    log(`build: changed since the last build: ${plan.stale.map((p) => p.name).join(", ")} (rebuilt with their dependents)`);
    await step("build", ["-r", "--workspace-concurrency=2", ...filters, "run", "build"]);
  }
  recordBuilt(plan);
}
