/**
 * Runs a service's `src/main.ts` as its own process (tsx, workspace sources), for tests that need
 * a real process boundary: kill -9, SIGTERM, two replicas. Readiness is awaited on `/readyz`,
 * never on a sleep.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";

/** A free TCP port on 127.0.0.1 (bound once, then released). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
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
 * survived into the old one and were collected again there. `pnpm bench delivery` measured the
 * worker at 0.28 ms of CPU per delivery without it, 0.22 with it (GC had been a quarter of its
 * CPU), and end-to-end throughput up by about 30%.
 *
 * V8's pool of background threads (garbage collection, compilation) sized 2 instead of Node's
 * default 4: no service is given more than 2 CPUs (infra/k8s), and more GC helpers than cores only
 * take the cores from the main thread and from the processes beside it. In `pnpm bench delivery`,
 * five runs alternated with the default 4 all read higher (+0.4 to +2.0 points, mean +1.3), the
 * worker's main thread running 72-73% of the run instead of 69-71%.
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
 * `port` fixes the port (a service that must know its own public address before it starts,
 * such as admin-api's PUBLIC_ADMIN_URL); a free one otherwise.
 */
export async function spawnService(
  serviceDir: string,
  env: Record<string, string>,
  options: { readyTimeoutMs?: number; nodeArgs?: string[]; port?: number } = {},
): Promise<ServiceProcess> {
  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  const port = options.port ?? (await freePort());
  const child = spawn(process.execPath, [...RUNTIME_NODE_FLAGS, ...(options.nodeArgs ?? []), "--import", "tsx", "--conditions=development", "src/main.ts"], {
    cwd: serviceDir,
    env: { ...process.env, NODE_OPTIONS: "", LOG_LEVEL: "warn", ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) => child.once("exit", (code) => reject(new Error(`${serviceDir} exited with ${code}: ${stderr}`))));
  exited.catch(() => undefined);
  const deadline = Date.now() + readyTimeoutMs;
  const ready = (async () => {
    while (Date.now() < deadline) {
      try {
        if ((await fetch(`${url}/readyz`)).status === 200) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill("SIGKILL");
    throw new Error(`${serviceDir} not ready within ${readyTimeoutMs} ms: ${stderr}`);
  })();
  await Promise.race([ready, exited]);
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
