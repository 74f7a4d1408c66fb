/**
 * Logs during an outage: while Redis or PostgreSQL is unreachable, the worker process
 * stays up and writes only JSON lines, one when the dependency goes and one when it is back, not a
 * stack trace per reconnect attempt. The outage is a loopback proxy in front of the real servers
 * that resets every connection (the shared servers are never touched).
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, spawnService, startTcpProxy, type ServiceProcess, type TcpProxy } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
let redisProxy: TcpProxy;
let pgProxy: TcpProxy;
let worker: ServiceProcess;

/** `url` with its host and port replaced by the proxy's. */
function through(url: string, proxy: TcpProxy): string {
  const u = new URL(url);
  u.hostname = proxy.host;
  u.port = String(proxy.port);
  return u.toString();
}

beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  const redisUrl = new URL(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const dbUrl = new URL(h.databaseUrl);
  redisProxy = await startTcpProxy(redisUrl.hostname, Number(redisUrl.port || 6379));
  pgProxy = await startTcpProxy(dbUrl.hostname, Number(dbUrl.port || 5432));
  worker = await spawnService(
    new URL("..", import.meta.url).pathname,
    h.processEnv({
      REDIS_URL: through(redisUrl.toString(), redisProxy),
      DATABASE_URL: through(dbUrl.toString(), pgProxy),
      LOG_LEVEL: "info",
    }),
  );
}, 90_000); // a worker process and two proxies: slow to start on a loaded machine
afterAll(async () => {
  if (worker?.child.exitCode === null) await worker.stop();
  await redisProxy?.close();
  await pgProxy?.close();
  await h?.close();
}, 90_000); // a worker process and two proxies: slow to start on a loaded machine

/** The worker's log lines, parsed; a line that is not JSON fails the test. */
function lines(): Array<Record<string, unknown>> {
  return worker
    .stdout()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`a log line is not JSON: ${l.slice(0, 300)}`);
      }
    });
}

/** {@link eventually}, with the worker's latest output added to the failure. */
async function eventuallyWithOutput(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  await eventually(what, check).catch((err: Error) => {
    throw new Error(`${err.message}; stdout: ${worker.stdout().slice(-2000)} stderr: ${worker.stderr().slice(-2000)}`);
  });
}

const outageLines = (dependency: string) => lines().filter((l) => l.dependency === dependency);

describe("delivery-worker logs during an outage", () => {
  it("logs a Redis outage once when it starts and once when it ends, as JSON, and keeps running", async () => {
    redisProxy.cut();
    await eventuallyWithOutput("the outage line was logged", () => outageLines("redis").length > 0);
    // Several reconnect attempts (each reset by the proxy) while it is down...
    await eventuallyWithOutput("five reconnects were refused", () => redisProxy.refused >= 5);
    redisProxy.restore();
    await eventuallyWithOutput("the recovery line was logged", () => outageLines("redis").some((l) => l.msg === "redis reachable again"));
    await eventuallyWithOutput("/readyz answers 200 again", async () => (await fetch(`${worker.url}/readyz`)).status === 200);

    // ...and still exactly one line each way.
    const redis = outageLines("redis");
    expect(redis.map((l) => [l.level, l.msg])).toEqual([
      [50, "redis unreachable"],
      [30, "redis reachable again"],
    ]);
    expect(redis[0]!.error).toEqual({ code: expect.any(String), message: expect.any(String) });
    expect(redis[1]!.failures).toBeGreaterThanOrEqual(5);
    expect(worker.stderr()).toBe("");
    expect(worker.child.exitCode).toBeNull();
  });

  it("logs a PostgreSQL outage once each way (seen by readiness checks), as JSON, and keeps running", async () => {
    pgProxy.cut();
    await eventuallyWithOutput("/readyz answers 503", async () => (await fetch(`${worker.url}/readyz`)).status === 503);
    // Each readiness check tries a new connection, which the proxy resets.
    await eventuallyWithOutput("three reconnects were refused", async () => {
      await fetch(`${worker.url}/readyz`);
      return pgProxy.refused >= 3;
    });
    pgProxy.restore();
    await eventuallyWithOutput("/readyz answers 200 again", async () => (await fetch(`${worker.url}/readyz`)).status === 200);
    await eventuallyWithOutput("the recovery line was logged", () => outageLines("postgresql").some((l) => l.msg === "postgresql reachable again"));
    expect(outageLines("postgresql").map((l) => [l.level, l.msg])).toEqual([
      [50, "postgresql unreachable"],
      [30, "postgresql reachable again"],
    ]);
    expect(worker.stderr()).toBe("");
    expect(worker.child.exitCode).toBeNull();
  });

  it("stops on SIGTERM with exit code 0 after both outages, before its shutdown deadline", async () => {
    // BullMQ's close can wait on a blocking connection still backing off after the Redis outage
    // (a known BullMQ behaviour); the worker leaves it behind after the bound instead of hanging
    // until its 30 s shutdown deadline (exit 1) or the orchestrator's kill.
    const code = await worker.stop();
    const closing = lines().filter((l) => l.msg === "did not close in time (a Redis connection still reconnecting); left behind");
    expect({ code, late: closing.map((l) => l.closing) }).toEqual({ code: 0, late: expect.any(Array) });
    // Exit code 0 is the proof: the bounds (attempt timeout + 5 s for the workers, 5 s for the
    // queues) end before the 30 s deadline, whose expiry would exit 1.
    expect(lines().at(-1)).toMatchObject({ msg: "stopped" });
  }, 40_000);
});
