/**
 * Blocking worker connections survive a failover without a restart (BullMQ workers stuck after a failover are a known defect):
 * a plain BullMQ Queue and Worker on `createRedisConnection`'s connections process jobs under a
 * steady load, the primary their queue lives on is SIGKILLed, a replica is promoted, and the same
 * Worker object takes new jobs again within 15 s of the kill. On a private Sentinel group and on a
 * private 3+3 Redis Cluster (packages/testing), never the machine's Redis. An unhandled rejection
 * anywhere fails the test (jest reports it as the test's error).
 *
 * A killed primary closes every socket, so ioredis reconnects by itself; a frozen one (SIGSTOP, as
 * behind a network partition) leaves them open and silent, and only the connection options bring
 * the worker back: without `failoverDetector` that test times out.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "@jest/globals";
import { Queue, Worker } from "bullmq";
import type { Cluster } from "ioredis";
import type { RedisTopology } from "@vw/service-kit";
import { eventually, startRedisCluster, startSentinelGroup } from "@vw/testing";
import { createRedisConnection, type RedisClient } from "./redis-connection.js";

/** packages/queues, where tsx and the workspace packages resolve from (for a script run as a process). */
const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Hash-tagged: every key of the queue (`<prefix>:{t}:...`) shares one slot, so one shard. */
const QUEUE = "{t}";
const PREFIX = "vwfailover";
/** How soon after the kill new jobs must be processed again. */
const RECOVERY_MS = 15_000;

interface Run {
  processed: Set<number>;
  /** Index of the next job the load adds. */
  next(): number;
  /** Adds refused while Redis was away (the producer fails fast). */
  refused(): number;
  workerErrors: Error[];
  worker: Worker;
  stop(): Promise<void>;
}

/** A queue and a worker on the role connections, and a load adding a job every 10 ms. */
async function startRun(topology: RedisTopology): Promise<Run> {
  const workerConnection = createRedisConnection(topology, "worker");
  const producerConnection = createRedisConnection(topology, "producer");
  // As the services do (watchRedisConnection): an `error` event without a listener would throw.
  for (const c of [workerConnection, producerConnection]) c.on("error", () => undefined);
  const queue = new Queue(QUEUE, { connection: producerConnection, prefix: PREFIX, defaultJobOptions: { removeOnComplete: true } });
  queue.on("error", () => undefined);
  const processed = new Set<number>();
  const worker = new Worker<{ i: number }>(QUEUE, async (job) => void processed.add(job.data.i), { connection: workerConnection, prefix: PREFIX, concurrency: 10 });
  const workerErrors: Error[] = [];
  worker.on("error", (err) => workerErrors.push(err));
  await worker.waitUntilReady();
  let index = 0;
  let refused = 0;
  let running = true;
  const load = (async () => {
    while (running) {
      const i = index++;
      await queue.add("job", { i }, { jobId: `job-${i}` }).catch(() => (refused += 1));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    processed,
    next: () => index,
    refused: () => refused,
    workerErrors,
    worker,
    stop: async () => {
      running = false;
      const closing = Promise.allSettled([load, worker.close(true), queue.close()]);
      // After a failed run a command may hang on a frozen primary, and a close behind it: dropping
      // the sockets ends both.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([closing, new Promise((resolve) => (timer = setTimeout(resolve, 5000)))]);
      clearTimeout(timer);
      for (const c of [workerConnection, producerConnection] as RedisClient[]) c.disconnect();
      await closing;
    },
  };
}

/** Runs the load, kills the primary, waits for the promotion and for new jobs to be processed. */
async function survivesFailover(topology: RedisTopology, killPrimary: () => Promise<void>, promoted: () => Promise<unknown>): Promise<void> {
  const run = await startRun(topology);
  try {
    await eventually("the worker processed 100 jobs before the failover", () => run.processed.size >= 100, { timeoutMs: 15_000 });
    const killedAt = Date.now();
    await killPrimary();
    await promoted();
    // Jobs added from now on exist only on the promoted primary: one of them processed proves the
    // worker's (blocking) connections found it.
    const firstAfter = run.next();
    await eventually(`the same worker processed a job added after the promotion, within ${RECOVERY_MS} ms of the kill`, () => [...run.processed].some((i) => i >= firstAfter), {
      timeoutMs: Math.max(1, killedAt + RECOVERY_MS - Date.now()),
    }).catch((err: Error) => {
      const state = `jobs added ${run.next()} (first after the promotion: ${firstAfter}), processed ${run.processed.size}, adds refused ${run.refused()}, worker errors: ${run.workerErrors.map((e) => e.message).join("; ")}`;
      throw new Error(`${err.message}; ${state}`);
    });
    expect(run.worker.isRunning()).toBe(true);
    expect(run.worker.closing).toBeFalsy();
  } finally {
    await run.stop();
  }
}

/**
 * A worker's Cluster connection coalesces each node's writes per tick, as a standalone worker
 * connection does (connection.int.test.ts): 100 commands of one tick to one node, one socket write.
 */
async function writesOneTickPerNodeWrite(topology: RedisTopology, owner: { host: string; port: number }): Promise<void> {
  const cluster = createRedisConnection(topology, "worker") as Cluster;
  try {
    await cluster.set("{c}:first", "1");
    const node = cluster.nodes("master").find((n) => n.options.port === owner.port)!;
    const socket = node.stream as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
    let writes = 0;
    for (const method of ["_write", "_writev"] as const) {
      const original = socket[method];
      socket[method] = function (this: unknown, ...a: unknown[]) {
        writes += 1;
        return original.apply(this, a);
      };
    }
    const values = Array.from({ length: 100 }, (_, i) => String(i));
    await Promise.all(values.map((v) => cluster.set(`{c}:${v}`, v)));
    expect(writes).toBe(1);
    expect(await cluster.mget(values.map((v) => `{c}:${v}`))).toEqual(values);
  } finally {
    cluster.disconnect();
  }
}

describe("a worker survives a failover without being recreated", () => {
  it("on Sentinel: the primary SIGKILLed under load, the replica promoted", async () => {
    const group = await startSentinelGroup();
    try {
      const topology: RedisTopology = { kind: "sentinel", sentinels: group.sentinelNodes, masterName: group.masterName, password: null, sentinelPassword: null, tls: false };
      let killed = group.dataNodes[0]!;
      await survivesFailover(
        topology,
        async () => void (killed = await group.killPrimary()),
        () => group.waitForFailover(killed),
      );
    } finally {
      await group.stop();
    }
  }, 120_000);

  it("on Sentinel: the primary frozen (SIGSTOP, as in a network partition) under load, the replica promoted", async () => {
    const group = await startSentinelGroup();
    try {
      const topology: RedisTopology = { kind: "sentinel", sentinels: group.sentinelNodes, masterName: group.masterName, password: null, sentinelPassword: null, tls: false };
      const frozen = await group.primary();
      await survivesFailover(
        topology,
        async () => void (await group.freezePrimary()),
        () => group.waitForFailover(frozen),
      );
    } finally {
      await group.stop();
    }
  }, 120_000);

  it("on Sentinel: a lost sentinel puts nothing on stderr (ioredis's failover detector would print there)", async () => {
    const group = await startSentinelGroup();
    // A process of its own, as a service is: its stderr is exactly what an operator's log shipper gets.
    const dir = mkdtempSync(join(packageDir, ".sentinel-stderr-"));
    try {
      const script = join(dir, "script.ts");
      writeFileSync(
        script,
        `import { createRedisConnection } from ${JSON.stringify(join(packageDir, "src", "redis-connection.ts"))};
const topology = ${JSON.stringify({ kind: "sentinel", sentinels: group.sentinelNodes, masterName: group.masterName, password: null, sentinelPassword: null, tls: false })};
const connection = createRedisConnection(topology, "worker");
const copy = connection.duplicate(); // BullMQ's blocking connections are copies
const reconnecting = [0, 0];
let bothRetried = () => {};
const retried = new Promise((resolve) => (bothRetried = resolve));
[connection, copy].forEach((c, i) => {
  c.on("error", () => undefined); // as watchRedisConnection does
  c.on("sentinelReconnecting", () => {
    reconnecting[i] += 1;
    if (reconnecting.every((n) => n >= 2)) bothRetried();
  });
});
await Promise.all([connection.ping(), copy.ping()]);
process.stdout.write("ready\\n");
// A second "reconnecting" follows a failed attempt on the lost sentinel: when ioredis would print.
await retried;
process.stdout.write(String(await connection.ping()) + "\\n");
connection.disconnect();
copy.disconnect();
process.exit(0);
`,
      );
      const child = spawn(process.execPath, ["--import", "tsx", "--conditions=development", script], { cwd: packageDir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NODE_OPTIONS: "" } });
      let out = "";
      let err = "";
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      await eventually("the script's connections are ready", () => out.includes("ready") || child.exitCode !== null, { timeoutMs: 20_000 });
      await group.killSentinel(0);
      await eventually("the script saw both connections retry the lost sentinel and exited", () => child.exitCode !== null || child.signalCode !== null, {
        timeoutMs: 30_000,
      }).catch((e: Error) => {
        child.kill("SIGKILL");
        throw new Error(`${e.message}; stdout: ${JSON.stringify(out)}, stderr: ${JSON.stringify(err)}`);
      });
      expect(await exited).toBe(0);
      expect(out).toBe("ready\nPONG\n");
      expect(err).toBe("");
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await group.stop();
    }
  }, 60_000);

  it("on Cluster: the primary holding the queue's slot SIGKILLed under load, its replica promoted", async () => {
    const cluster = await startRedisCluster({ primaries: 3, replicasPerPrimary: 1 });
    try {
      const topology: RedisTopology = { kind: "cluster", nodes: cluster.nodes, password: null, tls: false };
      await writesOneTickPerNodeWrite(topology, await cluster.primaryForKey("{c}"));
      const victim = await cluster.primaryForKey(`${PREFIX}:${QUEUE}:wait`);
      await survivesFailover(
        topology,
        () => cluster.kill(victim),
        () => cluster.waitForPromotion(victim),
      );
      expect(await cluster.primaries()).toHaveLength(3);
    } finally {
      await cluster.stop();
    }
  }, 120_000);
});
