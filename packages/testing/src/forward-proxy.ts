/**
 * A real forward proxy for the tests of DELIVERY_PROXY_URL: Debian's tinyproxy (`npm test`
 * installs it when missing, scripts/lib/test-tools.mjs), on its own loopback port with its own
 * configuration and log in a temp directory. The log is how a test knows what the proxy was asked
 * for (`CONNECT 127.0.0.1:4431`, `POST http://127.0.0.1:8080/hook`), and stopping the proxy is how
 * it makes one unreachable. Only the process started here is ever signalled, by its pid.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childExited, exited, ownListeningChild, removeDir, trackDir } from "./owned-processes.js";
import { freePort } from "./processes.js";

/** Where Debian installs tinyproxy. */
export const TINYPROXY_PATH = "/usr/bin/tinyproxy";

/** Options of {@link startForwardProxy}. */
export interface ForwardProxyOptions {
  /** Proxy credentials required of every client (tinyproxy's `BasicAuth`); none by default. */
  basicAuth?: { user: string; password: string };
  /** Ports CONNECT may reach (tinyproxy's `ConnectPort`); every port by default. */
  connectPorts?: readonly number[];
}

/** A running tinyproxy (see {@link startForwardProxy}). */
export interface ForwardProxy {
  readonly port: number;
  /** `http://[user:password@]127.0.0.1:<port>`, for DELIVERY_PROXY_URL. */
  readonly url: string;
  /** The request lines the proxy received so far (`CONNECT 127.0.0.1:4431 HTTP/1.1`, `POST http://... HTTP/1.1`). */
  requests(): string[];
  /** Its whole log so far. */
  log(): string;
  /** Kills the proxy (SIGKILL): it is down, its port refuses connections, until {@link restart}. */
  kill(): Promise<void>;
  /** Starts it again on the same port with the same configuration (killing it first if it runs). */
  restart(): Promise<void>;
  /** Stops the proxy (SIGKILL) and removes its files. Safe to call twice. */
  stop(): Promise<void>;
}

/** Starts tinyproxy on a free loopback port and resolves once it accepts connections. */
export async function startForwardProxy(options: ForwardProxyOptions = {}): Promise<ForwardProxy> {
  if (!existsSync(TINYPROXY_PATH)) throw new Error(`${TINYPROXY_PATH} is missing: apt-get install -y tinyproxy (npm test does it when run as root)`);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "vw-tinyproxy-"));
  trackDir(dir);
  const logFile = join(dir, "tinyproxy.log");
  const config = [
    `Port ${port}`,
    "Listen 127.0.0.1",
    "Timeout 30",
    `LogFile "${logFile}"`,
    // Connect: a line per client connection and per request line, which the tests read.
    "LogLevel Connect",
    "MaxClients 50",
    ...(options.basicAuth ? [`BasicAuth ${options.basicAuth.user} ${options.basicAuth.password}`] : []),
    ...(options.connectPorts ?? []).map((p) => `ConnectPort ${p}`),
  ];
  const configFile = join(dir, "tinyproxy.conf");
  writeFileSync(configFile, `${config.join("\n")}\n`);
  const readLog = (): string => (existsSync(logFile) ? readFileSync(logFile, "utf8") : "");
  let child: ChildProcess;
  try {
    child = await spawnTinyproxy(configFile, dir, port, readLog);
  } catch (err) {
    await removeDir(dir);
    throw err;
  }
  const kill = async (): Promise<void> => {
    if (exited(child)) return;
    child.kill("SIGKILL");
    await childExited(child);
  };
  const auth = options.basicAuth ? `${encodeURIComponent(options.basicAuth.user)}:${encodeURIComponent(options.basicAuth.password)}@` : "";
  return {
    port,
    url: `http://${auth}127.0.0.1:${port}`,
    requests: () => [...readLog().matchAll(/Request \(file descriptor \d+\): (.*)$/gm)].map((m) => m[1] ?? ""),
    log: readLog,
    kill,
    restart: async () => {
      await kill();
      child = await spawnTinyproxy(configFile, dir, port, readLog);
    },
    stop: async () => {
      await kill();
      await removeDir(dir);
    },
  };
}

/** Spawns tinyproxy in the foreground (`-d`: the pid is ours to stop) and resolves once it accepts connections. */
async function spawnTinyproxy(configFile: string, dir: string, port: number, readLog: () => string): Promise<ChildProcess> {
  // Started as root, it stays the current user (tinyproxy warns and goes on).
  const child = spawn(TINYPROXY_PATH, ["-d", "-c", configFile], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  return ownListeningChild(child, "tinyproxy", port, readLog);
}
