/**
 * A private `redis-server` (the machine's binary) for fault tests and benchmarks: its own loopback
 * port and temp directory, so a test can SIGKILL it, restart it with or without its data, or count
 * its commands, while the machine's Redis (6379) serves everyone else untouched.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually, GiveUp } from "./eventually.js";
import { childExited, removeDir, tail, trackDir, trackPid, untrackPid } from "./owned-processes.js";
import { freePort } from "./processes.js";
import { redisCommand } from "./resp-command.js";

/** Options of {@link startRedis}. */
export interface StartRedisOptions {
  /** Append-only file on (`appendfsync everysec`): the data survives a SIGKILL and a restart. Off by default (no persistence at all). */
  appendonly?: boolean;
  /** The port to listen on (127.0.0.1); a free one by default. */
  port?: number;
  /** The working directory (AOF, nodes.conf); a fresh temp directory, removed by `stop()`, by default. */
  dir?: string;
  /** More `redis-server` arguments (`["--cluster-enabled", "yes"]`, `["--replicaof", "127.0.0.1", "7000"]`, `["--sentinel"]`). */
  args?: readonly string[];
  /** A configuration file, given to `redis-server` first (a sentinel's, which Sentinel rewrites: keep it in `dir`). */
  configFile?: string;
  /** How long to wait for the server to answer PING (default 15 s). */
  readyTimeoutMs?: number;
}

/** A running private Redis (see {@link startRedis}). */
export interface PrivateRedis {
  /** `redis://127.0.0.1:<port>`, for REDIS_URL. */
  readonly url: string;
  readonly port: number;
  /** The server's pid; a new one after each restart. */
  readonly pid: number;
  readonly dir: string;
  /** True while the server process runs. */
  readonly alive: boolean;
  /**
   * Sends `signal` (SIGKILL by default) to the server. For a signal that ends it, resolves once
   * it has exited; SIGSTOP and SIGCONT resolve at once.
   */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Starts the server again on the same port and directory (stopping it first with SIGTERM if it
   * still runs), and resolves once it answers PING (its AOF loaded). `empty`: its data files are
   * deleted first, as a Redis replaced without its data.
   */
  restart(options?: { empty?: boolean }): Promise<void>;
  /** Kills the server and removes its directory when it made it. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts a private `redis-server` on 127.0.0.1 and resolves once it answers PING. The process is
 * killed by pid when this process exits, if `stop()` was not called first.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<PrivateRedis> {
  const port = options.port ?? (await freePort());
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "vw-redis-"));
  if (ownDir) trackDir(dir);
  const args = [
    ...(options.configFile === undefined ? [] : [options.configFile]),
    "--port", String(port),
    "--bind", "127.0.0.1",
    "--dir", dir,
    // Only the AOF persists (when asked): no RDB snapshot could bring data back after an empty restart.
    "--save", "",
    "--appendonly", options.appendonly === true ? "yes" : "no",
    "--daemonize", "no",
    "--logfile", "",
    ...(options.args ?? []),
  ];
  const readyTimeoutMs = options.readyTimeoutMs ?? 15_000;
  let child: ChildProcess;
  try {
    child = await spawnRedis(args, port, readyTimeoutMs);
  } catch (err) {
    if (ownDir) await removeDir(dir);
    throw err;
  }
  let stopped = false;
  const kill = async (signal: NodeJS.Signals = "SIGKILL"): Promise<void> => {
    const current = child;
    if (current.exitCode !== null || current.signalCode !== null) return;
    current.kill(signal);
    if (signal === "SIGSTOP" || signal === "SIGCONT") return;
    await childExited(current);
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    get pid() {
      return child.pid ?? -1;
    },
    get alive() {
      return child.exitCode === null && child.signalCode === null;
    },
    kill,
    restart: async ({ empty = false } = {}) => {
      if (stopped) throw new Error(`the private Redis on port ${port} was stopped; start another one`);
      await kill("SIGTERM");
      if (empty) {
        for (const name of ["appendonlydir", "appendonly.aof", "dump.rdb"]) rmSync(join(dir, name), { recursive: true, force: true });
      }
      child = await spawnRedis(args, port, readyTimeoutMs);
    },
    stop: async () => {
      stopped = true;
      await kill("SIGKILL");
      if (ownDir) await removeDir(dir);
    },
  };
}

/** Spawns `redis-server args` and resolves once it answers PING; kills it if it never does. */
async function spawnRedis(args: readonly string[], port: number, readyTimeoutMs: number): Promise<ChildProcess> {
  const child = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
  const output = tail(child.stdout);
  const errors = tail(child.stderr);
  let spawnError = "";
  child.on("error", (err) => (spawnError = err.message));
  const pid = child.pid;
  if (pid === undefined) throw new Error(`redis-server could not be started (is it installed?) ${spawnError}`);
  trackPid(pid);
  void childExited(child).then(() => untrackPid(pid));
  try {
    await eventually(
      `redis-server on port ${port} answers PING`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new GiveUp(`redis-server on port ${port} exited with ${child.exitCode ?? child.signalCode}: ${errors()}${output()}`);
        }
        return (await redisCommand(port, ["PING"])) === "PONG";
      },
      { timeoutMs: readyTimeoutMs },
    );
  } catch (err) {
    child.kill("SIGKILL");
    await childExited(child);
    throw err instanceof GiveUp ? err : new Error(`${(err as Error).message}; its output: ${errors()}${output()}`);
  }
  return child;
}
