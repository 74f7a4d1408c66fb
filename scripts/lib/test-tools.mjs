/**
 * Debian programs the suite drives as real processes, installed by `npm test` when missing, as the
 * README's test command must work on a fresh machine (.ci/run goes through `npm test`):
 * - Chromium for the dashboard's browser tests (/usr/bin/chromium, driven by playwright-core,
 *   which cannot download a browser on these machines);
 * - tinyproxy, the forward proxy that DELIVERY_PROXY_URL's tests send deliveries through;
 * - PgBouncer, the transaction-pooling proxy the `pgbouncer` tests run the services behind
 *   (packages/testing's startPgBouncer; Debian's 1.18 keeps no prepared statement across
 *   transactions, as most deployed poolers). The tests start their own on free ports; a daemon
 *   the package may start on 6432 is not used.
 * Missing ones are installed with one `apt-get install` (root and apt-get needed).
 * Dependency-free (node built-ins only).
 */
import { existsSync } from "node:fs";
import { run } from "./toolchain.mjs";

export const CHROMIUM_PATH = "/usr/bin/chromium";
export const TINYPROXY_PATH = "/usr/bin/tinyproxy";
export const PGBOUNCER_PATH = "/usr/sbin/pgbouncer";

/** What the suite needs: the binary, its Debian package, and which tests use it. */
export const TEST_TOOLS = [
  { path: CHROMIUM_PATH, pkg: "chromium", usedBy: "the dashboard's browser tests" },
  { path: TINYPROXY_PATH, pkg: "tinyproxy", usedBy: "the delivery proxy tests" },
  { path: PGBOUNCER_PATH, pkg: "pgbouncer", usedBy: "the PgBouncer (transaction pooling) tests" },
];

const log = (msg) => console.log(`[test] ${msg}`);

/**
 * Installs the Debian packages of {@link TEST_TOOLS} whose binary is missing (about 15 s for
 * Chromium after `apt-get update`; tinyproxy starts no daemon on install). Returns a problem
 * message when it could not, or null.
 */
export async function ensureTestTools(tools = TEST_TOOLS) {
  const missing = tools.filter((tool) => !existsSync(tool.path));
  if (missing.length === 0) return null;
  const packages = missing.map((tool) => tool.pkg);
  const hint = `install them (apt-get install -y --no-install-recommends ${packages.join(" ")}) and run again`;
  const what = missing.map((tool) => `${tool.path} (${tool.usedBy})`).join(", ");
  if (typeof process.getuid === "function" && process.getuid() !== 0) return `${what} missing and this user is not root: ${hint}`;
  if (!existsSync("/usr/bin/apt-get")) return `${what} missing and apt-get is not available: ${hint}`;
  log(`${what} missing: apt-get install ${packages.join(" ")}`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const update = await run("apt-get", ["update", "-qq"], { env, capture: true });
  if (update.code !== 0) return `apt-get update failed (${update.code}):\n${update.output.slice(-2000)}\n${hint}`;
  const install = await run("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages], { env, capture: true });
  const stillMissing = missing.filter((tool) => !existsSync(tool.path));
  if (install.code !== 0 || stillMissing.length > 0) return `apt-get install ${packages.join(" ")} failed (${install.code}):\n${install.output.slice(-2000)}\n${hint}`;
  log(`installed ${packages.join(", ")}`);
  return null;
}
