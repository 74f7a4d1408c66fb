import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  /** SIGTERM, then resolves with the exit code (0 after a graceful shutdown). */
  stop(): Promise<number | null>;
}

/** Runs `services/map-storage/src/main.ts` as its own process (tsx, workspace sources). */
export async function spawnMapStorage(env: Record<string, string>): Promise<ServiceProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=development", join(serviceDir, "src/main.ts")], {
    cwd: serviceDir,
    env: { ...process.env, NODE_OPTIONS: "", LOG_LEVEL: "warn", ...env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (c) => (stderr += c));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once("exit", (code) => reject(new Error(`map-storage exited with ${code}: ${stderr}`))),
  );
  // Wait on the child's readiness (or its death), not on a fixed sleep.
  const ready = (async () => {
    for (;;) {
      try {
        const res = await fetch(`${url}/readyz`);
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await Promise.race([ready, exited]);
  exited.catch(() => undefined);
  return {
    url,
    child,
    stop: () =>
      new Promise<number | null>((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once("exit", (code) => resolve(code));
        child.kill("SIGTERM");
      }),
  };
}
