/**
 * The Node the images run (`ARG NODE_IMAGE=node:<major>-...` in infra/docker/Dockerfile), as a
 * binary on this machine: this process' own Node when its major is that one, else the official
 * build from the npm registry's `node-linux-<arch>@<major>` package under `.dev-data/node-lts`, the
 * folder `.ci/run` installs it into for the suite's second run (installed there when missing).
 * `pnpm bench` runs every benchmark on it, so that what a benchmark measures is the deployed
 * runtime, as it already runs the services with the images' flags (RUNTIME_NODE_FLAGS).
 * Dependency-free, like toolchain.mjs.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, run } from "./toolchain.mjs";

export const NODE_LTS_DIR = join(ROOT, ".dev-data", "node-lts");

/** The images' Node major, read from infra/docker/Dockerfile. */
export function imagesNodeMajor(dockerfile = readFileSync(join(ROOT, "infra", "docker", "Dockerfile"), "utf8")) {
  const match = /^ARG NODE_IMAGE=node:(\d+)-/m.exec(dockerfile);
  if (!match) throw new Error("infra/docker/Dockerfile has no `ARG NODE_IMAGE=node:<major>-...` line");
  return Number(match[1]);
}

/** The npm package of the official Node build for this machine, or null where there is none. */
export function nodePackage(major, arch = process.arch) {
  const npmArch = { x64: "x64", arm64: "arm64" }[arch];
  return npmArch ? `node-linux-${npmArch}@${major}` : null;
}

/** The version (`v24.1.0`) and major of the Node binary at `path`, or null when it does not run. */
function versionOf(path) {
  try {
    const version = execFileSync(path, ["--version"], { encoding: "utf8" }).trim();
    return { version, major: Number(/^v(\d+)\./.exec(version)?.[1]) };
  } catch {
    return null;
  }
}

/**
 * Resolves with `{ path, version, installed }`: the images' Node (see the file comment), or this
 * process' Node with `reason` set when that one cannot be had (no package for this platform, the
 * registry unreachable): the caller says so rather than failing. `major` defaults to the images'.
 * @param {{ log?: (message: string) => void, major?: number }} [options]
 */
export async function imagesNode({ log = () => undefined, major = imagesNodeMajor() } = {}) {
  const own = { path: process.execPath, version: process.version, installed: false };
  if (Number(process.versions.node.split(".")[0]) === major) return own;
  const pkg = process.platform === "linux" ? nodePackage(major) : null;
  if (!pkg) return { ...own, reason: `no ${major}.x build for ${process.platform}-${process.arch} in the npm registry` };
  const bin = join(NODE_LTS_DIR, "node_modules", pkg.slice(0, pkg.lastIndexOf("@")), "bin", "node");
  let found = existsSync(bin) ? versionOf(bin) : null;
  if (found?.major === major) return { path: bin, version: found.version, installed: false };
  log(`installing ${pkg} (the images' Node) into ${NODE_LTS_DIR}`);
  const { code, output } = await run("npm", ["install", "--no-save", "--no-audit", "--no-fund", "--prefix", NODE_LTS_DIR, pkg], { capture: true });
  found = versionOf(bin);
  if (code !== 0 || found?.major !== major) return { ...own, reason: `npm install ${pkg} failed (exit ${code}): ${output.trim().split("\n").slice(-3).join(" ")}` };
  return { path: bin, version: found.version, installed: true };
}
