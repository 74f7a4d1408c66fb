/**
 * Shutdown on every Redis topology. A process must end by itself once it has closed its
 * connections: ioredis's QUIT leaves the connections of a Sentinel client's failover detector (one
 * per sentinel, per connection, BullMQ's blocking copies included) open and reconnecting, which
 * keeps a process that closed everything alive. Here:
 * - a process that opens a worker's and a producer's connection from `createRedisConnection`,
 *   runs a BullMQ job through them and closes them as the services do (`closeRedisConnection`),
 *   ends by itself, on the standalone Redis, the run's Sentinel group and its Cluster;
 * - each of the four services started on the run's Sentinel group (REDIS_SENTINELS and
 *   REDIS_SENTINEL_MASTER) exits 0 on SIGTERM: its shutdown tasks all finished before its
 *   deadline (past it, it exits 1) and none failed.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { spawnService, testKeyPrefix, testRedisEnv, type ServiceProcess, type TestTopology } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

const workerDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const servicesDir = join(workerDir, "..");

/** Runs the close fixture on `topology`; resolves with how it ended and what it wrote. */
function runCloseFixture(topology: TestTopology): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=development", "test/fixtures/redis-close.ts"], {
    cwd: workerDir,
    env: { ...process.env, NODE_OPTIONS: "", ...testRedisEnv(topology), REDIS_KEY_PREFIX: testKeyPrefix("close-") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
}

describe.each(["standalone", "sentinel", "cluster"] as const)("connections closed as the services close them, on %s", (topology) => {
  it("leave nothing open: the process ends by itself", async () => {
    expect(await runCloseFixture(topology)).toEqual({ code: 0, signal: null, stdout: "closed\n", stderr: "" });
  }, 60_000);
});

describe("the services on the run's Sentinel group, sent SIGTERM", () => {
  let h: Harness;
  const services = new Map<string, ServiceProcess>();
  beforeAll(async () => {
    h = await startHarness({ inProcessWorker: false, topology: "sentinel" });
  }, 60_000);
  afterAll(async () => {
    await Promise.all([...services.values()].map((s) => s.stop()));
    await h?.close();
  });

  it.each(["event-ingest", "delivery-worker", "admin-api", "map-storage"])("%s exits 0, every shutdown task done", async (name) => {
    const env = h.processEnv({
      LOG_LEVEL: "debug",
      ...(name === "event-ingest" ? { INGEST_TOKEN: "shutdown-ingest-token-4c9e2a7f1b6d3085", PLAY_URL: "https://play.example.test" } : {}),
      ...(name === "admin-api" ? { ADMIN_TOKEN: "shutdown-admin-token-8f3b1d6a2e9c4071" } : {}),
      ...(name === "map-storage" ? { REDIS_KEY_PREFIX: `${h.keyPrefix}:ms:`, ADMIN_TOKEN: "shutdown-admin-token-8f3b1d6a2e9c4071" } : {}),
    });
    const service = await spawnService(join(servicesDir, name), env, { readyTimeoutMs: 60_000 });
    services.set(name, service);
    // `stop` sends SIGTERM and resolves on the exit event: 0 only when every task ended before the deadline.
    const code = await service.stop();
    services.delete(name);
    const log = service
      .stdout()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { msg?: string; task?: string });
    expect({ name, code, failed: log.filter((l) => l.msg === "shutdown task failed" || l.msg?.startsWith("shutdown deadline")).map((l) => l.task) }).toEqual({ name, code: 0, failed: [] });
    expect(log.some((l) => l.msg === "stopped")).toBe(true);
    expect(log.filter((l) => l.msg === "shutdown task done").map((l) => l.task)).toContain("redis");
  }, 90_000);
});
