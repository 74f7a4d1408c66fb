/**
 * A real transaction-pooling PgBouncer for the tests that run the services behind one: Debian's
 * `pgbouncer` 1.18 (`npm test` installs it when missing, scripts/lib/test-tools.mjs), which keeps
 * no prepared statement across transactions, as most deployed poolers. It listens on its own
 * loopback port with its own configuration and log in a temp directory, in `pool_mode =
 * transaction`, and lets every client in (`auth_type = trust`): it logs in to PostgreSQL with the
 * user and password of `targetUrl`. Only the process started here is ever signalled, by its pid.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { childExited, exited, ownListeningChild, removeDir, trackDir } from "./owned-processes.js";
import { freePort } from "./processes.js";

/** Where Debian installs PgBouncer. */
export const PGBOUNCER_PATH = "/usr/sbin/pgbouncer";

/** Options of {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** The PostgreSQL it pools, `postgresql://user[:password]@host:port/anydb` (the database comes from each client). */
  targetUrl: string;
  /** Server connections per database and user (`default_pool_size`); 20 by default. */
  poolSize?: number;
}

/** A running PgBouncer (see {@link startPgBouncer}). */
export interface PgBouncer {
  readonly port: number;
  /**
   * `url` (a PostgreSQL URL) with its host and port replaced by PgBouncer's and `pgbouncer=true`
   * added: the DATABASE_URL of a service behind it.
   */
  urlFor(url: string): string;
  /** Its log so far. */
  log(): string;
  /**
   * The client connections it holds now (its admin console's `SHOW CLIENTS`): which process
   * (`application_name`) is connected to which database through it.
   */
  clients(): Promise<{ database: string; applicationName: string }[]>;
  /** Kills PgBouncer (SIGKILL): every client connection breaks, its port refuses new ones until {@link restart}. */
  kill9(): Promise<void>;
  /** Starts it again on the same port with the same configuration (killing it first if it runs). */
  restart(): Promise<void>;
  /** Stops it (SIGKILL) and removes its files. Safe to call twice. */
  stop(): Promise<void>;
}

/** Starts PgBouncer in transaction mode on a free loopback port; resolves once it accepts connections. */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  if (!existsSync(PGBOUNCER_PATH)) throw new Error(`${PGBOUNCER_PATH} is missing: apt-get install -y pgbouncer (npm test does it when run as root)`);
  const target = new URL(options.targetUrl);
  const user = decodeURIComponent(target.username || userInfo().username);
  const password = decodeURIComponent(target.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "vw-pgbouncer-"));
  trackDir(dir);
  const logFile = join(dir, "pgbouncer.log");
  const server = [
    `host=${target.hostname.replace(/^\[(.*)\]$/, "$1") || "127.0.0.1"}`,
    `port=${target.port || "5432"}`,
    `user=${user}`,
    ...(password ? [`password=${password}`] : []),
  ].join(" ");
  const config = [
    "[databases]",
    // Any database name a client asks for, on the target server, as the target's user.
    `* = ${server}`,
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    "auth_type = trust",
    `admin_users = ${user}`,
    `auth_file = ${join(dir, "userlist.txt")}`,
    "pool_mode = transaction",
    "max_client_conn = 1000",
    `default_pool_size = ${options.poolSize ?? 20}`,
    `logfile = ${logFile}`,
    "log_connections = 0",
    "log_disconnections = 0",
    // Clients reconnect at once after a restart; the server side is PostgreSQL's, always up.
    "server_login_retry = 1",
  ];
  const configFile = join(dir, "pgbouncer.ini");
  writeFileSync(configFile, `${config.join("\n")}\n`);
  // With trust, a client's user must still be listed; the password column is unused.
  writeFileSync(join(dir, "userlist.txt"), `"${user}" ""\n`);
  // PgBouncer refuses to run as root: as root it is started with `-u postgres`, which must write its log.
  const asUser = process.getuid?.() === 0 ? "postgres" : undefined;
  if (asUser) chmodSync(dir, 0o777);
  const readLog = (): string => (existsSync(logFile) ? readFileSync(logFile, "utf8") : "");
  const args = [...(asUser ? ["-u", asUser] : []), configFile];
  let child: ChildProcess;
  try {
    child = await spawnPgBouncer(args, dir, port, readLog);
  } catch (err) {
    await removeDir(dir);
    throw err;
  }
  const kill = async (): Promise<void> => {
    if (exited(child)) return;
    child.kill("SIGKILL");
    await childExited(child);
  };
  return {
    port,
    urlFor: (url: string) => {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      u.searchParams.set("pgbouncer", "true");
      return u.toString();
    },
    log: readLog,
    clients: async () => {
      const admin = new pg.Client({ host: "127.0.0.1", port, user, database: "pgbouncer" });
      await admin.connect();
      try {
        const { rows } = await admin.query<{ database: string; application_name: string }>("SHOW CLIENTS");
        return rows.map((row) => ({ database: row.database, applicationName: row.application_name }));
      } finally {
        await admin.end();
      }
    },
    kill9: kill,
    restart: async () => {
      await kill();
      child = await spawnPgBouncer(args, dir, port, readLog);
    },
    stop: async () => {
      await kill();
      await removeDir(dir);
    },
  };
}

/** Spawns PgBouncer in the foreground (no `-d`: the pid is ours to stop) and resolves once it accepts connections. */
async function spawnPgBouncer(args: string[], dir: string, port: number, readLog: () => string): Promise<ChildProcess> {
  const child = spawn(PGBOUNCER_PATH, args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  return ownListeningChild(child, "pgbouncer", port, readLog);
}
