#!/usr/bin/env node
/**
 * `pnpm bench <name> [args...]`: runs `bench/src/<name>.bench.ts` (the @vw/bench package; under tsx,
 * with the `development` export condition so workspace packages load from src) against private,
 * throwaway infrastructure: an s3rver on a random port with its own bucket, a fresh migrated database
 * `vw_bench_<random>` (created through TEST_PG_ADMIN_URL, default
 * postgresql://postgres@127.0.0.1:5432/postgres), and REDIS_URL (default redis://127.0.0.1:6379/0),
 * or the Sentinel or Cluster given by REDIS_SENTINELS or REDIS_CLUSTER_NODES (passed on as they are).
 * The benchmark gets DATABASE_URL, the Redis topology, the S3_* variables and LOG_LEVEL (default `warn`);
 * extra arguments are passed to it. Everything is stopped and dropped afterwards, also on Ctrl+C.
 * A benchmark listed in EXTRA_DATABASES also gets more migrated databases, one per name, as
 * `DATABASE_URL_<NAME>` (for example `history` compares an empty history with a 10M one, side by
 * side), and `BENCH_REDIS=cluster` gives a benchmark that compares a Redis Cluster it starts with a
 * standalone one (CLUSTER_DATABASES) a database per stack. Exits with the benchmark's exit code. Without a known name, lists the available benchmarks.
 *
 * Every benchmark runs on the Node the images run (infra/docker/Dockerfile; scripts/lib/images-node.mjs:
 * this Node when it is that major, else the official build installed under .dev-data/node-lts, as
 * `.ci/run` does), and so does everything it starts: a figure is a measurement of the deployed
 * runtime, not of whichever Node this machine has (the worker, ingest and the raw HTTP client each
 * cost less CPU per delivery on the images' Node than on an older one). `BENCH_NODE=machine` runs
 * on this process' Node instead, to compare.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { delimiter, dirname, join, relative } from "node:path";
import {
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  assertReachable,
  dropDatabase,
  ensureDatabase,
  migrate,
  randomSuffix,
  startS3rver,
} from "./lib/local-infra.mjs";
import { imagesNode } from "./lib/images-node.mjs";
import { ROOT, childEnv, signalExitCode } from "./lib/toolchain.mjs";

const log = (msg) => console.error(`[bench] ${msg}`);

/** Where the benchmarks are: the @vw/bench package's sources. */
const BENCH_DIR = join(ROOT, "bench", "src");

/** Every `bench/src/<name>.bench.ts`, as paths relative to the repository root. */
function availableBenches() {
  if (!existsSync(BENCH_DIR)) return [];
  return readdirSync(BENCH_DIR)
    .filter((file) => file.endsWith(".bench.ts"))
    .sort()
    .map((file) => relative(ROOT, join(BENCH_DIR, file)));
}

/** `bench/src/<name>.bench.ts`, or null. */
function findBench(name) {
  if (!name || !/^[a-z0-9][a-z0-9-]*$/.test(name)) return null;
  const path = join(BENCH_DIR, `${name}.bench.ts`);
  return existsSync(path) ? path : null;
}

const [name, ...benchArgs] = process.argv.slice(2);
const script = findBench(name);
if (!script || !existsSync(script)) {
  const list = availableBenches();
  console.error(name ? `[bench] unknown benchmark "${name}"` : "usage: pnpm bench <name> [args...]");
  console.error(list.length ? `available (pnpm bench <name> runs bench/src/<name>.bench.ts):\n${list.map((p) => `  ${p}`).join("\n")}` : "no bench/src/*.bench.ts exists yet");
  process.exit(2);
}

/** The Node binary the benchmark runs on (see the file comment), saying which and why. */
async function benchNode() {
  if (process.env.BENCH_NODE === "machine") {
    log(`Node ${process.version} (this machine's: BENCH_NODE=machine)`);
    return process.execPath;
  }
  const node = await imagesNode({ log });
  if (node.reason) log(`Node ${node.version} (this machine's): the images' Node could not be had, ${node.reason}`);
  else log(`Node ${node.version} (the images'${node.path === process.execPath ? "" : `, ${relative(ROOT, node.path)}`})`);
  return node.path;
}

if (process.env.BENCH_NODE && process.env.BENCH_NODE !== "machine") {
  console.error(`[bench] BENCH_NODE must be unset (the images' Node) or "machine" (this one), not "${process.env.BENCH_NODE}"`);
  process.exit(2);
}

/** Benchmarks that need more databases than the one in DATABASE_URL: their names (see the file comment). */
const EXTRA_DATABASES = { history: ["empty"], backlog: ["twin"] };
/**
 * Benchmarks that compare a Redis Cluster they start themselves with a standalone Redis under
 * `BENCH_REDIS=cluster`, and the databases they need for it (one per stack).
 */
const CLUSTER_DATABASES = { delivery: ["cluster"] };

const benchRedis = process.env.BENCH_REDIS || "";
if (benchRedis !== "" && (benchRedis !== "cluster" || !CLUSTER_DATABASES[name])) {
  console.error(
    benchRedis !== "cluster"
      ? `[bench] BENCH_REDIS must be unset or "cluster", not "${benchRedis}"`
      : `[bench] BENCH_REDIS=cluster: ${name} does not start a Cluster of its own (${Object.keys(CLUSTER_DATABASES).map((b) => `pnpm bench ${b}`).join(", ")} does)`,
  );
  process.exit(2);
}
const extraDatabases = [...(EXTRA_DATABASES[name] ?? []), ...(benchRedis === "cluster" ? CLUSTER_DATABASES[name] : [])];

const adminUrl = process.env.TEST_PG_ADMIN_URL || DEFAULT_PG_ADMIN_URL;
/** A Sentinel or Cluster topology given in the environment: then REDIS_URL is neither defaulted nor checked (two topologies would stop every service). */
const otherTopology = ["REDIS_SENTINELS", "REDIS_CLUSTER_NODES"].find((name) => process.env[name]);
const redisUrl = otherTopology ? null : process.env.REDIS_URL || DEFAULT_REDIS_URL;
const redisLabel = otherTopology ? `${otherTopology}=${process.env[otherTopology]}` : redisUrl;
const suffix = randomSuffix();
const dbName = `vw_bench_${suffix}`;
let s3 = null;
let dbCreated = false;
/** Extra databases created so far (dropped by cleanup). */
const extraDbs = [];
let child = null;
let cleaning = null;

async function cleanup() {
  cleaning ??= (async () => {
    if (s3) await s3.stop().catch((err) => log(`s3rver stop: ${err.message}`));
    if (dbCreated) await dropDatabase(adminUrl, dbName).catch((err) => log(`drop database ${dbName}: ${err.message}`));
    for (const extra of extraDbs) await dropDatabase(adminUrl, extra).catch((err) => log(`drop database ${extra}: ${err.message}`));
  })();
  return cleaning;
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child && child.exitCode === null) child.kill(signal); // the benchmark's exit then cleans up
    else void cleanup().then(() => process.exit(signalExitCode(signal)));
  });
}

try {
  if (redisUrl) await assertReachable(redisUrl, "Redis (REDIS_URL)", 6379);
  const { databaseUrl } = await ensureDatabase(adminUrl, dbName);
  dbCreated = true;
  await migrate(databaseUrl);
  const extraEnv = {};
  for (const extra of extraDatabases) {
    const extraName = `${dbName}_${extra}`;
    extraDbs.push(extraName);
    const { databaseUrl: extraUrl } = await ensureDatabase(adminUrl, extraName);
    await migrate(extraUrl);
    extraEnv[`DATABASE_URL_${extra.toUpperCase()}`] = extraUrl;
  }
  s3 = await startS3rver({ bucket: `vw-bench-${suffix}` });
  log(`database ${dbName}, s3rver ${s3.endpoint} bucket ${s3.bucket}, redis ${redisLabel}`);

  const env = childEnv(process.env, { DATABASE_URL: databaseUrl, ...extraEnv, ...(redisUrl ? { REDIS_URL: redisUrl } : {}), ...s3.env });
  env.LOG_LEVEL ||= "warn";
  const node = await benchNode();
  // What the benchmark starts with `node` (or process.execPath) is then that Node too.
  const pathKey = Object.keys(env).find((k) => k.toUpperCase() === "PATH") ?? "PATH";
  env[pathKey] = [dirname(node), env[pathKey]].filter(Boolean).join(delimiter);
  log(`running ${relative(ROOT, script)}`);
  child = spawn(node, ["--import", "tsx", "--conditions=development", script, ...benchArgs], { cwd: ROOT, env, stdio: "inherit" });
  const code = await new Promise((resolve) => {
    child.on("error", (err) => {
      log(`could not start the benchmark: ${err.message}`);
      resolve(1);
    });
    child.on("close", (c, signal) => resolve(c ?? signalExitCode(signal)));
  });
  await cleanup();
  process.exit(code);
} catch (err) {
  log(`FAILED: ${err.message}`);
  await cleanup();
  process.exit(1);
}
