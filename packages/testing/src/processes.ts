/**
 * Runs a service's `src/main.ts` as its own process (tsx, workspace sources), for tests that need
 * a real process boundary: kill -9, SIGTERM, two replicas. Readiness is awaited on `/readyz`,
 * never on a sleep.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { trackPid, untrackPid } from "./owned-processes.js";

/** The kernel's range for ports it hands out itself (listen on 0, outgoing connections). */
function ephemeralRange(): [number, number] {
  try {
    const [low = NaN, high = NaN] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low <= high) return [low, high];
  } catch {
    // not Linux: IANA's dynamic range
  }
  return [49152, 65535];
}

/** True when `port` can be bound on every interface right now (what the services bind). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "0.0.0.0", () => srv.close(() => resolve(true)));
  });
}

const BLOCK = 500;
let cursor: number | undefined;

/**
 * A TCP port free on every interface, for a process that binds it a moment later.
 *
 * Not one the kernel picks (listen on port 0): those come from its ephemeral range, the same
 * range every outgoing connection of the run (PostgreSQL, Redis, Chromium, fetch) takes its
 * local port from, so in the second or so a service needs to start, a connection could take the
 * port and the service would die with EADDRINUSE (it happened in CI). Ports are taken below that
 * range instead, from a block chosen by the process id (each jest worker is a process of its own),
 * each handed out once per process from a random start, and checked bindable on 0.0.0.0 first.
 * `spawnService` also retries on another port if one is taken all the same (another program,
 * another test run on the machine).
 */
export async function freePort(): Promise<number> {
  const [low, high] = ephemeralRange();
  // Blocks below the ephemeral range when there is room (from 10000 up), above it otherwise.
  const [below, above] = [low - 10_000, 65_535 - high];
  const [start, size] = below >= above ? [10_000, below] : [high + 1, above];
  const blocks = Math.floor(size / BLOCK);
  if (blocks < 1) return kernelPort();
  const base = start + (process.pid % blocks) * BLOCK;
  cursor ??= Math.floor(Math.random() * BLOCK);
  for (let tries = 0; tries < BLOCK; tries += 1) {
    const port = base + (cursor % BLOCK);
    cursor += 1;
    if (await bindable(port)) return port;
  }
  return kernelPort();
}

/** A port the kernel picks (bound once on 0.0.0.0, then released): the fallback. */
function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "0.0.0.0", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * The V8 flags every service runs with in production (infra/docker/Dockerfile's CMD; its test
 * checks the two agree), so processes spawned here behave as deployed. Semispaces of 32 MiB
 * instead of V8's default of at most 16: a service allocates a lot of short-lived objects per
 * request (HTTP, Redis and PostgreSQL messages), and with the default young generation they
 * survived into the old one and were collected again there: garbage collection was a large share
 * of the worker's CPU per delivery in `pnpm bench delivery`, and the larger semispaces cut it.
 *
 * V8's pool of background threads (garbage collection, compilation) sized 2 instead of Node's
 * default 4: no service is given more than 2 CPUs (infra/k8s), and more GC helpers than cores only
 * take the cores from the main thread and from the processes beside it. Runs of
 * `pnpm bench delivery` alternated with the default 4 all read higher with 2, the worker's main
 * thread running more of the run. See docs/decisions/0004-node-24-images-and-runtime-flags.md.
 */
export const RUNTIME_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=32", "--v8-pool-size=2"];

/** A running service process. */
export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  /** Everything the process wrote to stdout so far (its JSON log lines). */
  stdout(): string;
  /** SIGTERM, then resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL (kill -9): no shutdown code runs. Resolves once the process is gone. */
  kill9(): Promise<void>;
}

/**
 * Spawns `<serviceDir>/src/main.ts` with `env` (plus PORT) and waits for its `/readyz`.
 * `env` may be a function of the port, for a service that must know its own public address
 * before it starts (admin-api's PUBLIC_ADMIN_URL). `port` fixes the port; a free one otherwise,
 * and another one if that was taken before the service could bind it (EADDRINUSE).
 */
export async function spawnService(
  serviceDir: string,
  env: Record<string, string> | ((port: number) => Record<string, string>),
  options: { readyTimeoutMs?: number; nodeArgs?: string[]; port?: number } = {},
): Promise<ServiceProcess> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await spawnOnce(serviceDir, env, options);
    } catch (err) {
      if (options.port !== undefined || attempt >= 3 || !(err instanceof PortTakenError)) throw err;
    }
  }
}

class PortTakenError extends Error {}

async function spawnOnce(
  serviceDir: string,
  env: Record<string, string> | ((port: number) => Record<string, string>),
  options: { readyTimeoutMs?: number; nodeArgs?: string[]; port?: number },
): Promise<ServiceProcess> {
  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  const port = options.port ?? (await freePort());
  const child = spawn(process.execPath, [...RUNTIME_NODE_FLAGS, ...(options.nodeArgs ?? []), "--import", "tsx", "--conditions=development", "src/main.ts"], {
    cwd: serviceDir,
    env: { ...process.env, NODE_OPTIONS: "", LOG_LEVEL: "warn", ...(typeof env === "function" ? env(port) : env), PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Killed with this process if it ends first (a benchmark stopped by a signal, a jest worker ended).
  const pid = child.pid;
  if (pid !== undefined) {
    trackPid(pid);
    child.once("exit", () => untrackPid(pid));
  }
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once("exit", (code) => {
      const message = `${serviceDir} exited with ${code}: ${stderr}`;
      reject(/EADDRINUSE/.test(stderr) ? new PortTakenError(message) : new Error(message));
    }),
  );
  exited.catch(() => undefined);
  const deadline = Date.now() + readyTimeoutMs;
  let settled = false;
  /** The last answer of `/readyz` (or why there was none), for the error when it never says ready. */
  let lastAnswer = "no answer yet";
  const ready = (async () => {
    while (Date.now() < deadline && !settled) {
      try {
        // Bounded, so one stuck request cannot hold the loop past its deadline.
        const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) });
        if (res.status === 200) return;
        lastAnswer = `${res.status} ${(await res.text()).slice(0, 1000)}`;
      } catch (err) {
        lastAnswer = `no answer (${(err as Error).message})`; // not listening yet, or stuck
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (settled) return;
    child.kill("SIGKILL");
    throw new Error(
      `${serviceDir} not ready within ${readyTimeoutMs} ms; last /readyz: ${lastAnswer}; stderr: ${stderr.slice(-2000)}; stdout (its log): ${stdout.slice(-2000)}`,
    );
  })();
  try {
    await Promise.race([ready, exited]);
  } finally {
    settled = true;
  }
  const gone = (): Promise<void> => new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
  return {
    url,
    child,
    stderr: () => stderr,
    stdout: () => stdout,
    stop: async () => {
      const code = new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", (c) => resolve(c))));
      child.kill("SIGTERM");
      return code;
    },
    kill9: async () => {
      const done = gone();
      child.kill("SIGKILL");
      await done;
    },
  };
}
