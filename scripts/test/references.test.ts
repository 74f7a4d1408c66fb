/**
 * Every reference a reader follows resolves: relative links in the repository's Markdown files
 * point at files (and headings) that exist, and no file cites a document the repository does not
 * hold (a design document kept outside it, say).
 */
import { describe, expect, it } from "@jest/globals";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const tracked = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" })
  .split("\0")
  .filter((f) => f !== "" && existsSync(join(ROOT, f)));
const markdown = tracked.filter((f) => f.endsWith(".md"));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, "")
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/```[\s\S]*?```/g, "");
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));
}

/** Relative link targets of a Markdown file, outside code blocks and code spans. */
function links(text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe("references in the repository", () => {
  it("has Markdown files to check", () => {
    expect(markdown).toContain("README.md");
  });

  it.each(markdown)("%s: every relative link and anchor resolves", (file) => {
    const broken: string[] = [];
    for (const target of links(readFileSync(join(ROOT, file), "utf8"))) {
      const [path = "", anchor] = target.split("#");
      const resolved = path === "" ? join(ROOT, file) : join(ROOT, dirname(file), decodeURIComponent(path));
      if (!existsSync(resolved)) {
        broken.push(`${target}: ${relative(ROOT, resolved)} does not exist`);
        continue;
      }
      if (anchor !== undefined && statSync(resolved).isFile() && resolved.endsWith(".md") && !anchors(resolved).has(anchor)) {
        broken.push(`${target}: no heading with anchor #${anchor} in ${relative(ROOT, resolved)}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("cites no document that is not in the repository", () => {
    const names = new Set(tracked.map((f) => f.split("/").pop()));
    const cited: string[] = [];
    for (const file of tracked) {
      if (!/\.(ts|tsx|mjs|js|md|ya?ml|json|sh)$|Dockerfile$/.test(file) || file === "pnpm-lock.yaml") continue;
      const text = readFileSync(join(ROOT, file), "utf8");
      for (const m of text.matchAll(/\b([A-Z][A-Z0-9_-]+\.md)\b/g)) {
        if (!names.has(m[1]!)) cited.push(`${file} cites ${m[1]}`);
      }
    }
    expect(cited).toEqual([]);
  });
});
