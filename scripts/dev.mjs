#!/usr/bin/env node
/**
 * `npm run dev` / `pnpm dev`: the whole platform on this machine, in one supervising process.
 *   - set-up first (scripts/lib/setup-steps.mjs: pnpm, dependencies, build of what changed),
 *     unless DEV_SKIP_SETUP=1;
 *   - S3: an embedded s3rver on 127.0.0.1:9000 (DEV_S3_PORT), data in .dev-data/s3 (DEV_S3_DIR),
 *     bucket `maps`, unless S3_ENDPOINT is set (then the S3_* variables are used as given);
 *   - PostgreSQL: DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/vw_dev), created if
 *     missing, migrated; Redis: REDIS_URL (default redis://127.0.0.1:6379/0) under the key prefix
 *     REDIS_KEY_PREFIX (default `vw-dev`), so a dev stack never shares queues with anything else;
 *   - every built service (`services/<name>/dist/main.js`), run with the image's V8 flags
 *     (RUNTIME_NODE_FLAGS of packages/testing), on its port (SERVICES below; override
 *     one with <NAME>_PORT, e.g. ADMIN_API_PORT), bound to 127.0.0.1 (DEV_HOST=0.0.0.0 opens them
 *     to the network: mind that dev accepts any webhook URL and its tokens are published), output
 *     prefixed with its name;
 *   - waits for each GET /readyz, then creates (idempotently) organization `demo`, world `lobby`
 *     and a fresh API key, and prints URLs, tokens, ready-to-paste curl commands and the webhook
 *     walkthrough.
 * SIGINT, SIGTERM or SIGHUP (Ctrl+C, an IDE's stop button, `kill` of the npm process, which npm
 * passes on since the npm script `exec`s this one) stops the services (SIGTERM, SIGKILL after
 * 15 s) and s3rver, and exits once all are gone. So does the death of the parent process. A
 * service that dies, before or after it was ready, stops everything with exit code 1.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { createInterface } from "node:readline";
import { setupWorkspace } from "./lib/setup-steps.mjs";
import { ROOT, childEnv, stopRunningChildren } from "./lib/toolchain.mjs";

// local-infra.mjs needs pg and s3rver, which the set-up installs: loaded once it has run.
/** @type {typeof import("./lib/local-infra.mjs")} */
let infra;
/**
 * The V8 flags the services are deployed with (the image's CMD), from packages/testing's build,
 * which the set-up makes: dev runs them the way production and the benchmarks do.
 * @type {readonly string[]}
 */
let runtimeNodeFlags = [];

/** Default port of each known service (the root README); a service not listed gets the next from 3010. */
const SERVICE_PORTS = { "map-storage": 3001, "event-ingest": 3002, "admin-api": 3003, "delivery-worker": 3004 };
const FIRST_EXTRA_PORT = 3010;
const STOP_DEADLINE_MS = 15_000;

const DEMO_DASHBOARD_PATH = "/admin/v1/worlds/demo/lobby/dashboard-sessions";

/** Published dev-only tokens (examples/try-webhooks.sh defaults to them too). */
const DEV_ADMIN_TOKEN = "dev-admin-token-change-me-2f8c1e6a9b7d4053";
const DEV_INGEST_TOKEN = "dev-ingest-token-change-me-7a3e9c1f5b2d8640";

const env = process.env;
const settings = {
  databaseUrl: env.DATABASE_URL || "postgresql://postgres@127.0.0.1:5432/vw_dev",
  redisUrl: env.REDIS_URL || "redis://127.0.0.1:6379/0",
  redisKeyPrefix: env.REDIS_KEY_PREFIX || "vw-dev",
  host: env.DEV_HOST || "127.0.0.1",
  adminToken: env.ADMIN_TOKEN || DEV_ADMIN_TOKEN,
  ingestToken: env.INGEST_TOKEN || DEV_INGEST_TOKEN,
  s3Port: Number(env.DEV_S3_PORT || 9000),
  s3Directory: env.DEV_S3_DIR || join(ROOT, ".dev-data", "s3"),
  s3Bucket: "maps",
  readyTimeoutMs: Number(env.DEV_READY_TIMEOUT_MS || 60_000),
};

const color = process.stdout.isTTY && !env.NO_COLOR;
const paint = (code, text) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
const log = (msg) => console.log(`${paint("1", "[dev]")} ${msg}`);
const warn = (msg) => console.error(`${paint("33;1", "[dev]")} ${msg}`);

/** @type {{name: string, port: number, main: string, child?: import("node:child_process").ChildProcess, exited?: Promise<void>}[]} */
let services = [];
let s3 = null;
let stopping = false;

/** Every `services/<name>` with a built `dist/main.js`, sorted by port. */
function discoverServices() {
  const dir = join(ROOT, "services");
  const names = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
  let nextExtra = FIRST_EXTRA_PORT;
  const found = [];
  for (const name of names) {
    const main = join(dir, name, "dist", "main.js");
    if (!existsSync(main)) {
      warn(`services/${name} has no dist/main.js (not built?): skipped`);
      continue;
    }
    const override = env[`${name.toUpperCase().replace(/-/g, "_")}_PORT`];
    const port = Number(override || SERVICE_PORTS[name] || nextExtra++);
    found.push({ name, port, main });
  }
  return found.sort((a, b) => a.port - b.port);
}

/** True when something already accepts connections on 127.0.0.1:port. */
async function portTaken(port) {
  return infra.assertReachable(`http://127.0.0.1:${port}`, "", port).then(
    () => true,
    () => false,
  );
}

function pipeLines(stream, prefix, out) {
  createInterface({ input: stream, crlfDelay: Infinity }).on("line", (line) => out.write(`${prefix} ${line}\n`));
}

function startService(service, sharedEnv, width) {
  const palette = ["36", "35", "32", "34", "33", "96", "95", "92"];
  const prefix = paint(palette[services.indexOf(service) % palette.length], `${service.name.padEnd(width)} |`);
  // Own process group: a terminal's Ctrl+C reaches only this supervisor, which sends one SIGTERM.
  const child = spawn(process.execPath, ["--enable-source-maps", ...runtimeNodeFlags, service.main], {
    cwd: ROOT,
    env: { ...sharedEnv, ...service.env, PORT: String(service.port) },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  pipeLines(child.stdout, prefix, process.stdout);
  pipeLines(child.stderr, prefix, process.stderr);
  service.child = child;
  service.exited = new Promise((resolve) => child.once("exit", () => resolve()));
  child.once("error", (err) => warn(`${service.name}: ${err.message}`));
  child.once("exit", (code, signal) => {
    if (stopping) return;
    warn(`${service.name} exited (${signal ?? `code ${code}`}); stopping everything`);
    void shutdown(1);
  });
}

/** Resolves when GET /readyz answers 2xx; rejects when the process exits or the deadline passes. */
async function waitReady(service) {
  const deadline = Date.now() + settings.readyTimeoutMs;
  const url = `http://127.0.0.1:${service.port}/readyz`;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (service.child.exitCode !== null || service.child.signalCode !== null) throw new Error(`${service.name} exited before it was ready`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      if (res.ok) return;
      last = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
    } catch (err) {
      last = err.cause?.code ?? err.message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${service.name} not ready after ${settings.readyTimeoutMs} ms (${url}: ${last})`);
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  const running = services.filter((s) => s.child && s.child.exitCode === null && s.child.signalCode === null);
  if (running.length) log(`stopping ${running.map((s) => s.name).join(", ")}`);
  for (const s of running) s.child.kill("SIGTERM");
  const killer = setTimeout(() => {
    warn(`still running after ${STOP_DEADLINE_MS / 1000} s: sending SIGKILL`);
    for (const s of running) s.child.kill("SIGKILL");
  }, STOP_DEADLINE_MS);
  await Promise.all(running.map((s) => s.exited));
  clearTimeout(killer);
  if (s3) await s3.stop().catch((err) => warn(`s3rver: ${err.message}`));
  log("stopped");
  process.exit(code);
}

function shellQuote(value) {
  return `'${String(value).replace(/'/g, `'\\''`)}'`;
}

async function adminCall(base, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${settings.adminToken}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** Creates organization `demo`, world `lobby` (201, or 409 when already there) and a new API key. */
async function seedDemo(adminApi) {
  const base = `http://127.0.0.1:${adminApi.port}`;
  const expect = (what, res, ok) => {
    if (!ok.includes(res.status)) throw new Error(`${what}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
    return res;
  };
  expect("create organization demo", await adminCall(base, "POST", "/admin/v1/organizations", { slug: "demo", name: "Demo" }), [201, 409]);
  expect(
    "create world demo/lobby",
    await adminCall(base, "POST", "/admin/v1/organizations/demo/worlds", { slug: "lobby", name: "Lobby", adminEmails: ["admin@example.com"] }),
    [201, 409],
  );
  const key = expect(
    "create API key",
    await adminCall(base, "POST", "/admin/v1/worlds/demo/lobby/api-keys", { name: `pnpm dev ${new Date().toISOString()}` }),
    [201],
  ).json;
  if (!key?.token || !key?.mapStorageUrl) throw new Error(`create API key: unexpected answer ${JSON.stringify(key)}`);
  return key;
}

/** A one-time dashboard link for the demo world (every capability), or null with a warning. */
async function dashboardLink(adminApi) {
  const res = await adminCall(`http://127.0.0.1:${adminApi.port}`, "POST", DEMO_DASHBOARD_PATH, { ttlSeconds: 8 * 3600 });
  if (res.status === 201 && typeof res.json?.url === "string") return res.json.url;
  warn(`dashboard link not created: HTTP ${res.status} ${res.text.slice(0, 300)}`);
  return null;
}

function printSummary(demo, dashboard) {
  const width = Math.max(...services.map((s) => s.name.length), 11);
  const lines = ["", paint("32;1", "Everything is up."), ""];
  for (const s of services) lines.push(`  ${s.name.padEnd(width)}  http://localhost:${s.port}${isLoopback(settings.host) ? "" : `  (bound to ${settings.host})`}`);
  lines.push(`  ${"S3".padEnd(width)}  ${s3 ? `${s3.endpoint} (s3rver, bucket ${s3.bucket}, data in ${relative(ROOT, settings.s3Directory)})` : `${env.S3_ENDPOINT} (bucket ${env.S3_BUCKET ?? "?"})`}`);
  lines.push(`  ${"PostgreSQL".padEnd(width)}  ${infra.redact(settings.databaseUrl)}`);
  lines.push(`  ${"Redis".padEnd(width)}  ${settings.redisUrl}`);
  lines.push("", `  ADMIN_TOKEN   ${settings.adminToken}`);
  if (services.some((s) => s.name === "event-ingest")) lines.push(`  INGEST_TOKEN  ${settings.ingestToken}`);
  if (demo) {
    const room = `${demo.mapStorageUrl.replace(/\/+$/, "")}/rooms/hall.wam`;
    const wam = JSON.stringify({ version: "2.1.0", mapUrl: "https://example.com/map.tmj", entities: {}, areas: [], entityCollections: [], metadata: { name: "Demo" } });
    lines.push(
      "",
      "  Demo world demo/lobby",
      `  API key            ${demo.token}`,
      `  map-storage base   ${demo.mapStorageUrl}`,
      "",
      "  Store a room:",
      `    curl -i -X PUT ${shellQuote(room)} \\`,
      `      -H ${shellQuote(`Authorization: Bearer ${demo.token}`)} -H 'Content-Type: application/json' \\`,
      `      --data ${shellQuote(wam)}`,
      "  Read it back (public):",
      `    curl -i ${shellQuote(room)}`,
    );
  }
  const adminApi = services.find((s) => s.name === "admin-api");
  const ingest = services.find((s) => s.name === "event-ingest");
  if (demo && adminApi && ingest) {
    const vars = [`ADMIN=http://localhost:${adminApi.port}`, `INGEST=http://localhost:${ingest.port}`];
    if (settings.adminToken !== DEV_ADMIN_TOKEN) vars.push(`ADMIN_TOKEN=${shellQuote(settings.adminToken)}`);
    if (settings.ingestToken !== DEV_INGEST_TOKEN) vars.push(`INGEST_TOKEN=${shellQuote(settings.ingestToken)}`);
    lines.push(
      "",
      "  Try webhooks: receivers on 127.0.0.1 over plain http work in dev (ENDPOINT_URL_POLICY=any).",
      "  This creates an endpoint, starts a receiver that verifies signatures and sends it an event",
      "  (the README's \"Try webhooks\" walks through it):",
      `    ${vars.join(" ")} sh examples/try-webhooks.sh`,
    );
  }
  if (dashboard) {
    lines.push(
      "",
      "  Developers dashboard of demo/lobby (the link works once, within 10 minutes; the session lasts 8 h):",
      `    ${dashboard}`,
      "  Another link:",
      `    curl -s -X POST http://localhost:${adminApi.port}${DEMO_DASHBOARD_PATH} -H ${shellQuote(`Authorization: Bearer ${settings.adminToken}`)}`,
    );
  }
  lines.push("", "  Ctrl+C stops everything.", "");
  console.log(lines.join("\n"));
}

async function main() {
  if (/^(1|true)$/i.test(env.DEV_SKIP_SETUP ?? "")) log("DEV_SKIP_SETUP: using the installed dependencies and the last build as they are");
  else await setupWorkspace(env);
  if (stopping) return;
  infra = await import("./lib/local-infra.mjs");
  try {
    runtimeNodeFlags = (await import("../packages/testing/dist/processes.js")).RUNTIME_NODE_FLAGS;
  } catch (err) {
    warn(`packages/testing is not built (${err.message}): services run without the image's V8 flags; \`npm run setup\` builds it`);
  }
  services = discoverServices();
  if (services.length === 0) throw new Error("no service is built: run `npm run setup` (or `pnpm build`)");
  for (const s of services) {
    if (!Number.isInteger(s.port) || s.port <= 0) throw new Error(`${s.name}: invalid port ${s.port}`);
    if (await portTaken(s.port)) {
      const variable = `${s.name.toUpperCase().replace(/-/g, "_")}_PORT`;
      throw new Error(`port ${s.port} (${s.name}) is already in use: stop what listens there or set ${variable}`);
    }
  }

  await infra.assertReachable(settings.redisUrl, "Redis (REDIS_URL)", 6379);
  const { name: dbName, adminUrl } = infra.splitDatabaseUrl(settings.databaseUrl);
  try {
    const { created } = await infra.ensureDatabase(adminUrl, dbName);
    log(`database ${dbName} ${created ? "created" : "exists"}; applying migrations`);
  } catch (err) {
    // A DATABASE_URL whose user may not open the `postgres` database: the database may exist anyway.
    warn(`could not check or create database ${dbName} (${err.message}); applying migrations anyway`);
  }
  await infra.migrate(settings.databaseUrl);

  let s3Env = {};
  if (env.S3_ENDPOINT) {
    log(`S3: using S3_ENDPOINT=${env.S3_ENDPOINT} and the S3_* variables as given`);
  } else {
    try {
      s3 = await infra.startS3rver({ directory: settings.s3Directory, bucket: settings.s3Bucket, port: settings.s3Port });
    } catch (err) {
      throw new Error(`${err.message} (set DEV_S3_PORT, or S3_ENDPOINT to use another S3 server)`);
    }
    s3Env = s3.env;
    log(`s3rver on ${s3.endpoint}, bucket ${s3.bucket}`);
  }

  const mapStorage = services.find((s) => s.name === "map-storage");
  const sharedEnv = childEnv(process.env);
  const defaults = {
    DATABASE_URL: settings.databaseUrl,
    REDIS_URL: settings.redisUrl,
    ADMIN_TOKEN: settings.adminToken,
    INGEST_TOKEN: settings.ingestToken,
    PUBLIC_MAP_STORAGE_URL: `http://localhost:${mapStorage?.port ?? SERVICE_PORTS["map-storage"]}`,
    // Dashboard links and the dashboard's origin (CSRF check) follow the port admin-api is on.
    PUBLIC_ADMIN_URL: `http://localhost:${services.find((s) => s.name === "admin-api")?.port ?? SERVICE_PORTS["admin-api"]}`,
    PLAY_URL: "https://play.localhost",
    HOST: settings.host,
    REDIS_KEY_PREFIX: settings.redisKeyPrefix,
    // Webhook receivers in development are on localhost; the services log this setting loudly.
    ENDPOINT_URL_POLICY: "any",
    SECRETS_ENCRYPTION_KEY: "ZGV2LW9ubHkta2V5LWRvLW5vdC11c2UtaW4tcHJvZCE=", // fixed dev-only key ("dev-only-key-do-not-use-in-prod!"): secrets sealed in one run open in the next
    LOG_LEVEL: "info",
    // Human-readable lines in a terminal; LOG_FORMAT=json gives what production writes.
    LOG_FORMAT: "pretty",
  };
  for (const [k, v] of Object.entries(defaults)) if (!sharedEnv[k]) sharedEnv[k] = v;
  Object.assign(sharedEnv, s3Env);
  // map-storage keeps its keys (locks, version markers) apart from the queues', as in production.
  if (mapStorage) mapStorage.env = { REDIS_KEY_PREFIX: `${settings.redisKeyPrefix}:map-storage:` };
  if (!isLoopback(settings.host)) {
    warn(`DEV_HOST=${settings.host}: the services are reachable from the network, with the published dev tokens and ENDPOINT_URL_POLICY=any (anyone who can reach them can make the worker POST to internal addresses)`);
  }

  const width = Math.max(...services.map((s) => s.name.length));
  for (const s of services) {
    log(`starting ${s.name} on port ${s.port}`);
    startService(s, sharedEnv, width);
  }
  await Promise.all(services.map(waitReady));
  log(`ready: ${services.map((s) => s.name).join(", ")}`);

  let demo = null;
  let dashboard = null;
  const adminApi = services.find((s) => s.name === "admin-api");
  if (adminApi) {
    try {
      demo = await seedDemo(adminApi);
      dashboard = await dashboardLink(adminApi);
    } catch (err) {
      warn(`demo data not created: ${err.message}`);
    }
  } else {
    warn("admin-api is not built: no demo data");
  }
  printSummary(demo, dashboard);
}

function isLoopback(host) {
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (stopping) {
      // Second Ctrl+C: do not wait for graceful shutdown.
      for (const s of services) s.child?.kill("SIGKILL");
      stopRunningChildren("SIGKILL");
      return;
    }
    log(`${signal} received`);
    stopRunningChildren("SIGTERM"); // a set-up step (pnpm install or build) still running
    void shutdown(0);
  });
}
// The parent gone (its terminal closed, npm killed with SIGKILL): nobody can stop us any more, so
// stop now rather than leave the services listening. An orphan is re-parented (ppid changes).
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid && !stopping) {
    warn(`parent process ${parentPid} is gone; stopping everything`);
    void shutdown(0);
  }
}, 500).unref();
// Whatever ends this process, leave no service behind.
process.on("exit", () => {
  for (const s of services) if (s.child && s.child.exitCode === null && s.child.signalCode === null) s.child.kill("SIGKILL");
});

main().catch((err) => {
  if (stopping) return;
  warn(`FAILED: ${err.message}`);
  void shutdown(1);
});
