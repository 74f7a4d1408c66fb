/**
 * Bookkeeping shared by the private stores (redis-server, PostgreSQL): every server process they
 * start is registered here by pid, with the temp directories it uses, until it is stopped. A store
 * stops its own processes in `stop()`; whatever is still registered when this process ends (a test
 * that threw before its `afterAll`, a start that failed halfway, a jest worker ended by a signal)
 * is killed here by pid and its directories removed. Nothing else is ever signalled: the machine's
 * own Redis and PostgreSQL are never touched.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { connect } from "node:net";
import { eventually, GiveUp } from "./eventually.js";

interface Owned {
  /** The signal that ends the process at once (SIGKILL; SIGQUIT for a postmaster, whose children follow it). */
  killSignal: NodeJS.Signals;
  dirs: string[];
}

const owned = new Map<number, Owned>();
const ownedDirs = new Set<string>();
let hooked = false;

/** Registers a server process started by a store; it is killed if this process ends first. */
export function trackPid(pid: number, killSignal: NodeJS.Signals = "SIGKILL"): void {
  hookExit();
  owned.set(pid, { killSignal, dirs: [] });
}

/** Forgets a process once it has exited (or been stopped by its store). */
export function untrackPid(pid: number): void {
  owned.delete(pid);
}

/** Registers a temp directory to remove at exit if its store never got to remove it. */
export function trackDir(dir: string): void {
  hookExit();
  ownedDirs.add(dir);
}

/** Removes a temp directory and forgets it (a PostgreSQL cluster's takes a second or two). */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  ownedDirs.delete(dir);
}

/**
 * True while a process with this pid runs. A zombie (exited, not yet reaped) counts as gone: a
 * postmaster is reparented to PID 1, which in some containers reaps its orphans only every second
 * or two.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return process.platform !== "linux"; // no /proc to tell: trust kill(0)
  }
}

function killAllSync(): void {
  for (const [pid, { killSignal }] of owned) {
    try {
      process.kill(pid, killSignal);
    } catch {
      // already gone
    }
  }
  owned.clear();
  for (const dir of ownedDirs) rmSync(dir, { recursive: true, force: true });
  ownedDirs.clear();
}

const SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once("exit", killAllSync);
  for (const signal of SIGNALS) {
    const onSignal = (): void => {
      killAllSync();
      // Alone on this signal, we replaced Node's default (exit): restore it and let it act.
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, onSignal);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, onSignal);
  }
}

/** Resolves once `child` has exited (at once if it already has). */
export function childExited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

/** Resolves once no process has `pid` any more (for processes that are not our children). */
export async function pidExited(pid: number, timeoutMs = 30_000): Promise<void> {
  await eventually(`process ${pid} exited`, () => !isAlive(pid), { timeoutMs, intervalMs: 20 });
}

/** The last `max` characters a stream wrote, for error messages. */
export function tail(stream: NodeJS.ReadableStream | null, max = 4000): () => string {
  let text = "";
  stream?.on("data", (chunk: Buffer | string) => {
    text = (text + chunk.toString()).slice(-max);
  });
  return () => text;
}

/** Runs a command to completion; rejects with its output when it exits non-zero. */
export function run(command: string, args: readonly string[], options: { cwd?: string; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${command} ${args.join(" ")} exited with ${code ?? signal}: ${output.slice(-2000)}`));
    });
  });
}

/** Whether `child` has ended (exited or killed). */
export function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Owns a just-spawned server `child` (its pid killed when the test process ends) and resolves with
 * it once something accepts connections on 127.0.0.1:`port`; a child that exits first rejects with
 * its output and `readLog()`, and one that never listens is killed before the rejection.
 */
export async function ownListeningChild(child: ChildProcess, name: string, port: number, readLog: () => string = () => ""): Promise<ChildProcess> {
  const output = tail(child.stdout);
  const errors = tail(child.stderr);
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${name} could not be started`);
  trackPid(pid);
  void childExited(child).then(() => untrackPid(pid));
  try {
    await eventually(`${name} on port ${port} accepts connections`, async () => {
      if (exited(child)) throw new GiveUp(`${name} exited with ${child.exitCode ?? child.signalCode}: ${errors()}${output()}${readLog()}`);
      return accepts(port);
    });
  } catch (err) {
    child.kill("SIGKILL");
    await childExited(child);
    throw err;
  }
  return child;
}

/** True when something accepts a TCP connection on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
