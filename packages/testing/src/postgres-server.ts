/**
 * A private PostgreSQL 15 for fault tests and long benchmarks: its own cluster (initdb) in a temp
 * directory, on a free loopback port, with PostgreSQL's default settings (autovacuum on, unlike
 * the machine's CI-tuned server; one crash-recovery setting aside, see RECOVERY_SETTINGS), trust
 * authentication on loopback. A test can crash it
 * (`pg_ctl stop -m immediate`) and start it again while the machine's PostgreSQL (5432) serves
 * everyone else untouched.
 *
 * `initdb` and `postgres` refuse to run as root: as root, every PostgreSQL binary runs as the
 * `postgres` user (`runuser -u postgres --`) in a directory that user owns.
 */
import { execFileSync } from "node:child_process";
import { chownSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { isAlive, pidExited, removeDir, run, trackDir, trackPid, untrackPid } from "./owned-processes.js";
import { freePort } from "./processes.js";

/** Where Debian's PostgreSQL 15 keeps its server binaries. */
export const POSTGRES_BIN_DIR = "/usr/lib/postgresql/15/bin";

/**
 * The one setting that differs from PostgreSQL's defaults. Before recovering from a crash the
 * server fsyncs every file of the cluster one by one (`recovery_init_sync_method = fsync`); on a
 * cluster made with `initdb --no-sync` that took 3-4 s per start after `stopImmediate`. `syncfs`
 * flushes the file system in one call (under half a second) and changes nothing else.
 */
const RECOVERY_SETTINGS: Readonly<Record<string, string>> = { recovery_init_sync_method: "syncfs" };

/** Options of {@link startPostgres}. */
export interface StartPostgresOptions {
  /** The port to listen on (127.0.0.1); a free one by default. */
  port?: number;
  /** Server settings passed as `-c name=value`; PostgreSQL's defaults otherwise (but `recovery_init_sync_method`, see RECOVERY_SETTINGS). */
  settings?: Readonly<Record<string, string>>;
  /** The binaries' directory; {@link POSTGRES_BIN_DIR} by default. */
  binDir?: string;
}

/** A running private PostgreSQL (see {@link startPostgres}). */
export interface PrivatePostgres {
  readonly port: number;
  /** The postmaster's pid, or null while the server is stopped. */
  readonly pid: number | null;
  /** `postgresql://postgres@127.0.0.1:<port>/<database>` (`postgres` by default). */
  url(database?: string): string;
  /** Creates a database (letters, digits and `_`) and resolves with its URL. */
  createDatabase(name: string): Promise<string>;
  /** `pg_ctl stop -m immediate`: a crash (no checkpoint; recovery runs at the next start). */
  stopImmediate(): Promise<void>;
  /** Starts the server again (after {@link stopImmediate}) and resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops the server (immediately) and deletes its files; the handle is done. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Creates a PostgreSQL cluster in a temp directory and starts it; resolves once it accepts
 * connections. The postmaster is killed by pid when this process exits, if `stop()` was not
 * called first.
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PrivatePostgres> {
  const binDir = options.binDir ?? POSTGRES_BIN_DIR;
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), "vw-pg-"));
  trackDir(dir);
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, "data");
  const pgRun = (binary: string, args: readonly string[], timeoutMs?: number): Promise<string> => {
    const path = join(binDir, binary);
    return asRoot ? run("runuser", ["-u", "postgres", "--", path, ...args], { cwd: dir, timeoutMs }) : run(path, args, { cwd: dir, timeoutMs });
  };
  const settings = { ...RECOVERY_SETTINGS, ...options.settings };
  const serverOptions = [`-p ${port}`, `-k ${dir}`, "-c listen_addresses=127.0.0.1", ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(" ");
  let pid: number | null = null;

  const startServer = async (): Promise<void> => {
    try {
      await pgRun("pg_ctl", ["-D", data, "-l", join(dir, "server.log"), "-o", serverOptions, "-w", "-t", "60", "start"], 70_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}; server log: ${serverLog(dir)}`);
    } finally {
      // Whatever pg_ctl said, a postmaster that wrote its pid is ours to stop.
      pid = postmasterPid(data);
      if (pid !== null) trackPid(pid, "SIGQUIT");
    }
    if (pid === null) throw new Error(`PostgreSQL on port ${port} started without a postmaster.pid: ${serverLog(dir)}`);
  };
  const stopServer = async (): Promise<void> => {
    const current = pid;
    if (current === null) return;
    if (isAlive(current)) {
      await pgRun("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {
        // pg_ctl could not do it (the postmaster is wedged): SIGQUIT is the same immediate shutdown.
        if (isAlive(current)) process.kill(current, "SIGQUIT");
      });
      await pidExited(current);
    }
    untrackPid(current);
    pid = null;
  };

  try {
    await pgRun("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"]);
    await startServer();
  } catch (err) {
    await stopServer().catch(() => undefined);
    await removeDir(dir);
    throw new Error(`private PostgreSQL did not start: ${(err as Error).message}`);
  }

  const url = (database = "postgres"): string => `postgresql://postgres@127.0.0.1:${port}/${database}`;
  let stopped = false;
  return {
    port,
    get pid() {
      return pid;
    },
    url,
    createDatabase: async (name) => {
      if (!/^[A-Za-z0-9_]{1,63}$/.test(name)) throw new Error(`database name must be 1-63 letters, digits or _: ${name}`);
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    stopImmediate: stopServer,
    start: async () => {
      if (stopped) throw new Error(`the private PostgreSQL on port ${port} was stopped; start another one`);
      if (pid !== null && isAlive(pid)) return;
      await startServer();
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await stopServer();
      await removeDir(dir);
    },
  };
}

/** The postmaster's pid from `postmaster.pid` (its first line), or null when there is none. */
function postmasterPid(data: string): number | null {
  try {
    const pid = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function serverLog(dir: string): string {
  try {
    return readFileSync(join(dir, "server.log"), "utf8").slice(-2000);
  } catch {
    return "(no server log)";
  }
}
