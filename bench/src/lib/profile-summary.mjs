#!/usr/bin/env node
/**
 * `node bench/src/lib/profile-summary.mjs <file.cpuprofile> [top] [filter]`: what a CPU profile
 * written under BENCH_PROFILE_DIR spent its time on: self time by module (a package under
 * node_modules, a workspace source file, or a Node internal) and by function, then inclusive time
 * by function (each function counted once per sampled stack), idle left out of the percentages.
 * `filter` (a regular expression) keeps only the matching rows of the inclusive list.
 * Samples taken while the thread waited for a core in a system call count as that call's time:
 * on a crowded machine socket writes look dearer than they are; the processes' CPU seconds the
 * benchmark prints do not include that wait.
 */
import { readFileSync } from "node:fs";

const [file, topArg, filter] = process.argv.slice(2);
if (!file) {
  console.error("usage: profile-summary.mjs <file.cpuprofile> [top] [filter]");
  process.exit(2);
}
const top = Number(topArg ?? 40);
const keep = filter ? new RegExp(filter) : null;
const profile = JSON.parse(readFileSync(file, "utf8"));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
const self = new Map();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

/** A package under node_modules, `services/<name>/<file>` or `packages/<name>/<file>`, or the file's name. */
const moduleOf = (url) => {
  if (!url) return "(native)";
  const pkg = url.match(/node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/);
  if (pkg) return pkg[1];
  const own = url.match(/\/(packages|services|bench)\/([^/]+)\/src\/(.*)$/);
  return own ? `${own[1]}/${own[2]}/${own[3]}` : url.replace(/^.*\//, "");
};
const frame = ({ functionName, url, lineNumber }) => `${functionName || "(anonymous)"} ${moduleOf(url)}:${lineNumber + 1}`;

let busy = 0;
let idle = 0;
const byModule = new Map();
const byFunction = new Map();
const inclusive = new Map();
const add = (map, key, t) => map.set(key, (map.get(key) ?? 0) + t);
for (const [id, t] of self) {
  const node = nodes.get(id);
  if (node.callFrame.functionName === "(idle)") {
    idle += t;
    continue;
  }
  busy += t;
  add(byModule, moduleOf(node.callFrame.url), t);
  add(byFunction, frame(node.callFrame), t);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const key = frame(nodes.get(at).callFrame);
    if (!seen.has(key)) {
      seen.add(key);
      add(inclusive, key, t);
    }
  }
}

const print = (title, map, only = null) => {
  console.log(`== ${title}`);
  const rows = [...map].filter(([key]) => !only || only.test(key)).sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [key, t] of rows) console.log(`${((t / busy) * 100).toFixed(1).padStart(5)}% ${(t / 1000).toFixed(0).padStart(7)} ms  ${key}`);
};
console.log(`${file}: busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms`);
print("self time by module", byModule);
print("self time by function", byFunction);
print("inclusive time by function", inclusive, keep);
