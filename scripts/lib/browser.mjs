/**
 * Chromium for the dashboard's browser tests: Debian's /usr/bin/chromium, driven by playwright-core
 * (which cannot download a browser on these machines). `npm test` installs it when it is missing,
 * as the README's test command must work on a fresh machine; .ci/run goes through `npm test`.
 * Dependency-free (node built-ins only).
 */
import { existsSync } from "node:fs";
import { run } from "./toolchain.mjs";

export const CHROMIUM_PATH = "/usr/bin/chromium";

const log = (msg) => console.log(`[test] ${msg}`);

/**
 * Installs Debian's `chromium` package when /usr/bin/chromium is missing (root and apt-get
 * needed; about 15 s after `apt-get update`). Returns a problem message when it could not, or null.
 */
export async function ensureChromium() {
  if (existsSync(CHROMIUM_PATH)) return null;
  const hint = "install Debian's Chromium (apt-get install -y --no-install-recommends chromium) and run again";
  if (typeof process.getuid === "function" && process.getuid() !== 0) return `${CHROMIUM_PATH} is missing and this user is not root: ${hint}`;
  if (!existsSync("/usr/bin/apt-get")) return `${CHROMIUM_PATH} is missing and apt-get is not available: ${hint}`;
  log(`${CHROMIUM_PATH} is missing: apt-get install chromium (the dashboard's browser tests need it)`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const update = await run("apt-get", ["update", "-qq"], { env, capture: true });
  if (update.code !== 0) return `apt-get update failed (${update.code}):\n${update.output.slice(-2000)}\n${hint}`;
  const install = await run("apt-get", ["install", "-y", "-qq", "--no-install-recommends", "chromium"], { env, capture: true });
  if (install.code !== 0 || !existsSync(CHROMIUM_PATH)) return `apt-get install chromium failed (${install.code}):\n${install.output.slice(-2000)}\n${hint}`;
  const version = await run(CHROMIUM_PATH, ["--version"], { capture: true });
  log(`installed ${version.output.trim()}`);
  return null;
}
