/**
 * `npm run dev` as a newcomer and their tools use it: started through npm, the README's webhook
 * walkthrough run against it as written, its dashboard link opened, then stopped with SIGTERM or SIGINT sent to the npm
 * process alone (an IDE's stop button, a process manager). Nothing may be left running or
 * listening afterwards.
 *
 * The stack runs on free ports, a private database, a private Redis key prefix and a temporary
 * S3 folder, so it never meets a developer's own `npm run dev`. DEV_SKIP_SETUP: the suite's
 * set-up has installed and built everything already.
 */
import { afterAll, describe, expect, it } from "@jest/globals";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { RUNTIME_NODE_FLAGS, freePort } from "../../packages/testing/src/processes.js";
import { databaseUrlFor, dropDatabase, splitDatabaseUrl } from "../lib/local-infra.mjs";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SERVICES = ["MAP_STORAGE", "EVENT_INGEST", "ADMIN_API", "DELIVERY_WORKER"] as const;

/** True when something accepts a TCP connection on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

/** Every process whose ancestry leads to `pid` (read from /proc). */
function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid ...": comm may hold spaces, so read after the last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // exited while listing
    }
  }
  const found: number[] = [];
  const walk = (parent: number) => {
    for (const [child, ppid] of parents) if (ppid === parent) (found.push(child), walk(child));
  };
  walk(pid);
  return found;
}

/** A process's arguments (from /proc), empty when it has exited meanwhile. */
function commandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves with the output so far once `pattern` appears in it; rejects if the process exits first. */
function waitForOutput(child: ChildProcess, output: { text: string }, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (pattern.test(output.text)) {
        child.stdout?.off("data", check);
        child.off("exit", exited);
        resolve(output.text);
      }
    };
    const exited = (code: number | null) => reject(new Error(`exited (${code}) before ${pattern}:\n${output.text.slice(-3000)}`));
    child.stdout?.on("data", check);
    child.once("exit", exited);
    check();
  });
}

function capture(child: ChildProcess): { text: string } {
  const output = { text: "" };
  child.stdout?.on("data", (d: Buffer) => (output.text += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (output.text += d.toString()));
  return output;
}

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

async function startDev() {
  const ports = Object.fromEntries(await Promise.all(SERVICES.map(async (s) => [s, await freePort()] as const)));
  const s3Port = await freePort();
  const suffix = randomBytes(4).toString("hex");
  const { adminUrl, name } = splitDatabaseUrl(process.env.DATABASE_URL!);
  const dbName = `${name}_dev_${suffix}`;
  // The run's prefix (test/global-setup.js), so the global teardown would catch a leak too.
  const redisKeyPrefix = `vwtest-${process.env.VW_TEST_RUN ?? "norun"}-dev-${suffix}`;
  const s3Dir = mkdtempSync(join(tmpdir(), "vw-dev-s3-"));
  cleanups.push(async () => {
    rmSync(s3Dir, { recursive: true, force: true });
    await dropDatabase(adminUrl, dbName);
    const redis = new Redis(process.env.REDIS_URL!);
    const keys = await redis.keys(`${redisKeyPrefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // The suite's own S3 server and database are not the dev stack's.
    if (v !== undefined && !/^(S3_|DATABASE_URL$|REDIS_KEY_PREFIX$)/.test(k)) env[k] = v;
  }
  Object.assign(env, {
    DEV_SKIP_SETUP: "1",
    DATABASE_URL: databaseUrlFor(adminUrl, dbName),
    REDIS_KEY_PREFIX: redisKeyPrefix,
    DEV_S3_PORT: String(s3Port),
    DEV_S3_DIR: s3Dir,
    NO_COLOR: "1",
  });
  for (const s of SERVICES) env[`${s}_PORT`] = String(ports[s]);

  const npm = spawn("npm", ["run", "dev"], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  const output = capture(npm);
  cleanups.push(async () => {
    for (const pid of [...descendants(npm.pid!), npm.pid!]) if (alive(pid)) process.kill(pid, "SIGKILL");
  });
  await waitForOutput(npm, output, /Everything is up\./);
  return { npm, output, ports: [...Object.values(ports), s3Port] };
}

describe("npm run dev", () => {
  it("runs the README's webhook walkthrough as written, and stops everything on SIGTERM to npm", async () => {
    const { npm, output, ports } = await startDev();

    // The banner tells how to try webhooks; run exactly that script, on a free receiver port.
    const command = /^ {4}(ADMIN=\S+ INGEST=\S+) sh examples\/try-webhooks\.sh$/m.exec(output.text);
    expect(command).not.toBeNull();
    const vars = Object.fromEntries(command![1]!.split(" ").map((kv) => kv.split("=") as [string, string]));
    const walkthrough = spawn("sh", ["examples/try-webhooks.sh"], {
      cwd: ROOT,
      env: { ...process.env, ...vars, RECEIVER_PORT: String(await freePort()) },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const walkOutput = capture(walkthrough);
    try {
      const text = await waitForOutput(walkthrough, walkOutput, /verified visitor\.registered [0-9a-f-]{36}/);
      expect(text).toMatch(/"accepted":1/);
    } finally {
      process.kill(-walkthrough.pid!, "SIGTERM"); // the script and its background receiver
    }

    // The dashboard link it prints opens a session of the demo world (the page's exchange).
    const link = /^ {4}(http:\/\/localhost:\d+\/dashboard\/#code=\S+)$/m.exec(output.text);
    expect(link).not.toBeNull();
    const url = new URL(link![1]!);
    const exchange = await fetch(new URL("/dashboard/api/session", url), {
      method: "POST",
      headers: { "content-type": "application/json", origin: url.origin },
      body: JSON.stringify({ code: new URLSearchParams(url.hash.slice(1)).get("code") }),
    });
    expect(exchange.status).toBe(200);
    expect(await exchange.json()).toMatchObject({ organization: "demo", world: "lobby" });

    await expectStopsCompletely(npm, ports, "SIGTERM");
  }, 120_000);

  it("stops everything on SIGINT to npm", async () => {
    const { npm, ports } = await startDev();
    await expectStopsCompletely(npm, ports, "SIGINT");
  }, 120_000);

  it("shows the walkthrough and its receiver in the README exactly as they are in examples/", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    for (const file of ["examples/try-webhooks.sh", "examples/webhook-receiver.mjs"]) {
      expect(readme).toContain(readFileSync(join(ROOT, file), "utf8").trimEnd());
    }
  });
});

async function expectStopsCompletely(npm: ChildProcess, ports: number[], signal: NodeJS.Signals) {
  const tree = descendants(npm.pid!);
  expect(tree.length).toBeGreaterThanOrEqual(5); // dev.mjs and the four services
  // Each service runs with the V8 flags it is deployed with (the image's CMD).
  const serviceArgs = tree.map(commandLine).filter((args) => args.some((a) => /\/services\/[^/]+\/dist\/main\.js$/.test(a)));
  expect(serviceArgs).toHaveLength(SERVICES.length);
  for (const args of serviceArgs) expect(args).toEqual(expect.arrayContaining([...RUNTIME_NODE_FLAGS]));
  for (const port of ports) expect(await listening(port)).toBe(true);

  const exited = new Promise<number | null>((resolve) => npm.once("exit", (code) => resolve(code)));
  npm.kill(signal);
  await exited;

  expect(tree.filter(alive)).toEqual([]);
  for (const port of ports) expect(await listening(port)).toBe(false);
}
