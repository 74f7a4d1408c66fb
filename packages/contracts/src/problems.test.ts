/**
 * The catalogue of problem types is the only list: the root README's table shows exactly it, and
 * no source or test file of the repository names a `/problems/<code>` outside it (service-kit's
 * AppError only takes catalogue codes, so this also catches a problem written by hand).
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { PROBLEM_CODES, PROBLEM_SCHEMA, PROBLEM_TYPES, isProblemCode, problemTypeUri } from "./problems.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");

function readmeTable(): Map<string, string> {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const start = readme.indexOf("<!-- problem-types:start -->");
  const end = readme.indexOf("<!-- problem-types:end -->");
  if (start === -1 || end === -1) throw new Error("README.md has no problem-types table markers");
  const rows = new Map<string, string>();
  for (const line of readme.slice(start, end).split("\n")) {
    const m = /^\| `([a-z-]+)` \| ([0-9, ]+) \|/.exec(line);
    if (m) rows.set(m[1]!, m[2]!.trim());
  }
  return rows;
}

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name === "dist" || name === "generated" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (/\.(ts|tsx|mjs|js|md)$/.test(name)) out.push(path);
  }
  return out;
}

describe("the catalogue of problem types", () => {
  it("is what the root README's table lists, code by code with its statuses", () => {
    const table = readmeTable();
    expect([...table.keys()]).toEqual(PROBLEM_CODES);
    for (const code of PROBLEM_CODES) expect({ code, statuses: table.get(code) }).toEqual({ code, statuses: PROBLEM_TYPES[code].statuses.join(", ") });
  });

  it("covers every /problems/<code> named anywhere in the services, packages, scripts and READMEs", () => {
    const unknown: string[] = [];
    const files = [...sourceFiles(join(ROOT, "services")), ...sourceFiles(join(ROOT, "packages")), ...sourceFiles(join(ROOT, "scripts")), join(ROOT, "README.md")];
    expect(files.length).toBeGreaterThan(50);
    for (const file of files) {
      const text = readFileSync(file, "utf8");
      for (const m of text.matchAll(/\/problems\/([a-z][a-z0-9-]*)/g)) {
        if (!isProblemCode(m[1]!)) unknown.push(`${relative(ROOT, file)}: /problems/${m[1]}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it("is the enum of the problem schema's type", () => {
    expect(PROBLEM_SCHEMA.properties.type.enum).toEqual(PROBLEM_CODES.map(problemTypeUri));
    expect(isProblemCode("unauthorized")).toBe(false);
  });
});
