/**
 * `pnpm bench delivery`: events through event-ingest → BullMQ → one delivery-worker process → a
 * receiver in its own process, with the attempt log on; against two baselines measured in the same
 * run on the same receiver: the raw ceiling (signed POSTs at the worker's concurrency, no
 * queue, no log) and the no-op BullMQ job rate. The ceiling and the all-healthy end-to-end run
 * alternate BENCH_ROUNDS (3) times and their medians are compared; each end-to-end run also says
 * how many jobs the worker parked (found their endpoint's window full) and the CPU time per
 * delivery of the worker and of ingest (from their `process_cpu_seconds_total`), next to the raw
 * client's CPU per POST: those move far less with the machine's noise than throughput does, so
 * they show what a change to the worker costs or saves. Both sides are bound by one JavaScript
 * thread each, so the run also says how much of it the worker's main thread and the ceiling's
 * client ran and how much they waited for a core (Linux schedstat), how many cores the
 * end-to-end run kept busy, and the CPU per job of a no-op BullMQ job. Then the end-to-end run
 * with 10% of the endpoints never answering, comparing the healthy endpoints' throughput with the
 * all-healthy run.
 * Finally an open-loop run: events at a steady 80% of the measured end-to-end maximum for
 * BENCH_STEADY_SECONDS (30), printing the lag from intake to receiver a receiver sees at that rate
 * (a burst's lag is only its drain time), and the CPU per delivery of every process and the Redis
 * commands per delivery during it beside the burst's, and how many intake transactions ingest
 * stored its requests in: a steady intake arrives in small requests, whose fixed costs (round trips,
 * statements, BullMQ pipelines) a burst of 100 events per request spreads thinly, so the open loop
 * falls behind when 80% of the burst's maximum exceeds what the steady costs leave.
 * `BENCH_STEADY_RATE=<deliveries/s>` runs only that: after the warm-up, an open loop at that rate
 * for BENCH_STEADY_SECONDS, then one burst of BENCH_DELIVERIES to compare its costs with (keep
 * BENCH_DELIVERIES small when profiling the open loop with BENCH_PROFILE_DIR).
 * The services run with the flags they are deployed with (RUNTIME_NODE_FLAGS); so does the raw
 * ceiling's client, which runs in this process: the benchmark starts itself again with them when
 * it was started without (the ceiling would otherwise be measured on a slower runtime than the
 * worker it is compared with).
 * With BENCH_TRACING=1 it measures OpenTelemetry's cost instead: the same bursts through a pair
 * of services with tracing off and a pair exporting every span (lib/tracing-cost.ts).
 * Expects DATABASE_URL and REDIS_URL (scripts/bench.mjs provides them).
 *
 * `BENCH_REDIS=cluster` runs the end-to-end part instead on two stacks side by side, one on a
 * standalone Redis and one on a 3-primary Redis Cluster, both started here, and compares their
 * throughput, Redis commands per delivery and how the Cluster's primaries share them
 * (lib/delivery-cluster.ts; scripts/bench.mjs then also provides DATABASE_URL_CLUSTER).
 */
import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { randomBytes, randomUUID } from "node:crypto";
import { join } from "node:path";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { createPrismaClient } from "@vw/db";
import { bullPrefix } from "@vw/queues";
import { RUNTIME_NODE_FLAGS, spawnService, type ServiceProcess } from "@vw/testing";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents, generateSecret, generateSecretBoxKey, sendAttempt } from "@vw/webhook-core";
import {
  deleteKeysUnder,
  mainThreadTime,
  metricValues,
  openLoop,
  postEvents,
  ingestRetries,
  postgresCpuBetween,
  postgresCpuSeconds,
  receiverReached,
  receiverStats,
  redisCpuSeconds,
  commandCalls,
  commandDelta,
  resetReceiver,
  startReceiver,
  threadShares,
  type ThreadShares,
} from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { tracingCost } from "./lib/tracing-cost.js";
import { benchRedisMode, standaloneRedisUrl } from "./lib/redis-target.js";
import { serviceDir } from "./lib/services.js";

const ownFlags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)];
if (!RUNTIME_NODE_FLAGS.every((flag) => ownFlags.includes(flag))) {
  const again = spawnSync(process.execPath, [...RUNTIME_NODE_FLAGS, ...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit" });
  process.exit(again.status ?? 1);
}

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 100);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 20_000);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 20);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const POSTERS = Number(process.env.BENCH_POSTERS ?? 4);
const STEADY_SECONDS = Number(process.env.BENCH_STEADY_SECONDS ?? 30);
/** With a rate (deliveries/s), only an open loop at that rate and one burst to compare it with. */
const STEADY_RATE = Number(process.env.BENCH_STEADY_RATE ?? 0);
/** Alternating rounds of the raw ceiling and the all-healthy end-to-end run (medians compared). */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const INGEST_TOKEN = "bench-ingest-token-3d7a1f9c5e2b8046";
/** The processes whose CPU per delivery the report prints, in its order. */
const CPU_PARTS = ["worker", "ingest", "postgres", "redis", "receiver"] as const;

const databaseUrl = process.env.DATABASE_URL!;
const clusterComparison = benchRedisMode("delivery") === "cluster";
/** The environment's Redis (unused by the Cluster comparison, which starts its own). */
const redisUrl = clusterComparison ? "" : standaloneRedisUrl("delivery");
const keyPrefix = `vwbench-${randomBytes(4).toString("hex")}`;
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);
const log = (msg: string): void => console.log(msg);
const goals = new GoalTally();

/** Raw ceiling: signed POSTs (webhook-core's own sendAttempt), `CONCURRENCY` in flight, no queue, no log. */
async function rawCeiling(origin: string, total: number): Promise<{ rate: number; cpuMs: number; thread: ThreadShares | null }> {
  const agents = createDeliveryAgents("any");
  const secret = generateSecret();
  const body = Buffer.from(JSON.stringify({ deliveryId: randomUUID(), type: "visitor.registered", timestamp: new Date().toISOString(), data: { uuid: "u", name: "n", email: "e@example.com", via: "sso" } }));
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const threadBefore = mainThreadTime(process.pid);
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < total) {
        next += 1;
        const sent = await sendAttempt({ url: `${origin}/ok/raw`, deliveryId: randomUUID(), attemptNumber: 1, trigger: "initial", body, secret, agents, timeoutMs: 15_000 });
        if (sent.verdict !== "delivered") throw new Error(`raw POST failed: ${sent.errorKind ?? sent.responseStatus}: ${sent.error}`);
      }
    }),
  );
  const rate = total / ((performance.now() - start) / 1000);
  const thread = threadShares(threadBefore, mainThreadTime(process.pid));
  const cpu = process.cpuUsage(cpuBefore);
  destroyDeliveryAgents(agents);
  return { rate, cpuMs: (cpu.user + cpu.system) / 1000 / total, thread };
}

/**
 * No-op BullMQ job rate: addBulk then a worker with the same concurrency that does nothing; also
 * the CPU per job of fetching and completing it (this process, which runs the worker, plus Redis):
 * what every delivery pays for being a BullMQ job before it does anything.
 */
async function noopBullmq(total: number): Promise<{ rate: number; cpuMs: number }> {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const prefix = bullPrefix(`${keyPrefix}-noop`);
  const queue = new Queue("noop", { connection, prefix });
  for (let i = 0; i < total; i += 1000) {
    await queue.addBulk(Array.from({ length: Math.min(1000, total - i) }, () => ({ name: "noop.v1", data: {}, opts: { removeOnComplete: true } })));
  }
  let done = 0;
  const redisBefore = await redisCpuSeconds(connection);
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const finished = new Promise<void>((resolve) => {
    const worker = new Worker("noop", async () => undefined, { connection, prefix, concurrency: CONCURRENCY });
    worker.on("completed", () => {
      done += 1;
      if (done === total) void worker.close().then(() => resolve());
    });
  });
  await finished;
  const rate = total / ((performance.now() - start) / 1000);
  const cpu = process.cpuUsage(cpuBefore);
  const redisMs = ((await redisCpuSeconds(connection)) - redisBefore) * 1000;
  await queue.obliterate({ force: true });
  await queue.close();
  await connection.quit();
  return { rate, cpuMs: ((cpu.user + cpu.system) / 1000 + redisMs) / total };
}

/**
 * With BENCH_PROFILE_DIR, each service writes CPU profiles under `<dir>/<name>/` when stopped (one
 * per thread: the largest is the main thread's).
 */
function profileArgs(name: string): string[] {
  const dir = process.env.BENCH_PROFILE_DIR;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${join(dir, name)}`] : [];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startReceiver();
  const processes: ServiceProcess[] = [];
  let redis: Redis | undefined;
  try {
    const commonEnv = { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_KEY_PREFIX: keyPrefix, LOG_LEVEL: "warn" };
    const ingest = await spawnService(
      serviceDir("event-ingest"),
      { ...commonEnv, INGEST_TOKEN, SECRETS_ENCRYPTION_KEY: secretsKey },
      { nodeArgs: profileArgs("ingest") },
    );
    processes.push(ingest);
    const worker = await spawnService(
      serviceDir("delivery-worker"),
      { ...commonEnv, SECRETS_ENCRYPTION_KEY: secretsKey, ENDPOINT_URL_POLICY: "any", DELIVERY_CONCURRENCY: String(CONCURRENCY) },
      { nodeArgs: profileArgs("worker") },
    );
    processes.push(worker);
    const stats = new Redis(redisUrl);
    redis = stats;
    /** What the processes have done so far: jobs the worker parked, CPU seconds of each. */
    const soFar = async () => {
      const [parked, workerCpu] = (await metricValues(worker, ["vw_delivery_parked_total", "process_cpu_seconds_total"])) as [number, number];
      // intakeBatches: intake transactions of ingest so far (vw_ingest_batch_requests: its count).
      const [ingestCpu, intakeBatches] = (await metricValues(ingest, ["process_cpu_seconds_total", "vw_ingest_batch_requests_count"])) as [number, number];
      return {
        parked,
        workerCpu,
        ingestCpu,
        intakeBatches,
        receiverCpu: (await receiverStats(receiver.origin)).cpuMs / 1000,
        redisCpu: await redisCpuSeconds(stats),
        postgresCpu: postgresCpuSeconds(),
        redisCalls: await commandCalls(stats),
      };
    };
    /** CPU ms per item of each process between two readings. */
    const cpuPer = (before: Awaited<ReturnType<typeof soFar>>, after: Awaited<ReturnType<typeof soFar>>, items: number) => ({
      worker: ((after.workerCpu - before.workerCpu) * 1000) / items,
      ingest: ((after.ingestCpu - before.ingestCpu) * 1000) / items,
      receiver: ((after.receiverCpu - before.receiverCpu) * 1000) / items,
      redis: ((after.redisCpu - before.redisCpu) * 1000) / items,
      postgres: (postgresCpuBetween(before.postgresCpu, after.postgresCpu) * 1000) / items,
    });
    /**
     * Redis commands per item between two readings (scripts' own commands included; this
     * benchmark's INFO polling left out), and how many of them were script calls (BullMQ's and the
     * scheduler's `evalsha`).
     */
    const redisPer = (before: Awaited<ReturnType<typeof soFar>>, after: Awaited<ReturnType<typeof soFar>>, items: number) => {
      const delta = new Map(commandDelta(before.redisCalls, after.redisCalls).all);
      const polling = (delta.get("info") ?? 0) + (delta.get("ping") ?? 0);
      const total = [...delta.values()].reduce((sum, n) => sum + n, 0) - polling;
      return { commands: total / items, scripts: ((delta.get("evalsha") ?? 0) + (delta.get("eval") ?? 0)) / items };
    };

    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });

    /** A world with `healthy` + `hung` endpoints on the receiver. */
    const createWorld = async (healthy: number, hung: number) => {
      const world = await prisma.world.create({ data: { organizationId: organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
      for (let i = 0; i < healthy + hung; i += 1) {
        await prisma.webhookEndpoint.create({
          data: {
            worldId: world.id,
            url: `${receiver.origin}/${i < healthy ? "ok" : "hang"}/${i}`,
            subscriptions: ["visitor"],
            format: "current",
            apiVersion: "2026-11-01",
            secretSealed: box.seal(generateSecret()),
          },
        });
      }
      return world;
    };

    /** One end-to-end run: a world with `healthy` + `hung` endpoints, events until `deliveries` healthy deliveries. */
    const endToEnd = async (healthy: number, hung: number, deliveries: number) => {
      const world = await createWorld(healthy, hung);
      await resetReceiver(receiver.origin);
      const events = Math.ceil(deliveries / healthy);
      const batches: { timestamp: string }[][] = [];
      for (let i = 0; i < events; i += BATCH) {
        batches.push(
          Array.from({ length: Math.min(BATCH, events - i) }, (_, j) => ({
            id: `evt-${i + j}-${randomUUID()}`,
            world: `${organization.slug}/${world.slug}`,
            type: "visitor.registered",
            timestamp: "", // set at send time
            data: { uuid: randomUUID(), name: "Bench Visitor", email: "visitor@example.com", via: "email" },
          })),
        );
      }
      const expected = events * healthy;
      const before = await soFar();
      const threadBefore = mainThreadTime(worker.child.pid);
      const start = Date.now();
      let nextBatch = 0;
      await Promise.all(
        Array.from({ length: POSTERS }, async () => {
          while (nextBatch < batches.length) {
            // A 503 (storage slower than ingest's bound on a crowded machine) is retried as a producer would.
            await postEvents(ingest.url, INGEST_TOKEN, batches[nextBatch++]!);
          }
        }),
      );
      const ingestSeconds = (Date.now() - start) / 1000;
      const s = await receiverReached(receiver.origin, expected);
      const thread = threadShares(threadBefore, mainThreadTime(worker.child.pid));
      const seconds = (s.lastAt - start) / 1000;
      const after = await soFar();
      return {
        expected,
        rate: expected / seconds,
        seconds,
        ingestRate: expected / ingestSeconds,
        p50: s.p50,
        p99: s.p99,
        parked: after.parked - before.parked,
        /** CPU ms per delivery of each process: a machine's noise moves throughput far more than this. */
        cpu: cpuPer(before, after, expected),
        /** Redis commands and script calls per delivery. */
        redis: redisPer(before, after, expected),
        /** The worker's main thread: the share of the run it ran, and waited for a core. */
        thread,
      };
    };

    /** The open loop: events posted at `rate` deliveries/s for STEADY_SECONDS to a new world, until all were received. */
    const openLoopRun = async (rate: number) => {
      const world = await createWorld(ENDPOINTS, 0);
      await resetReceiver(receiver.origin);
      const before = await soFar();
      const threadBefore = mainThreadTime(worker.child.pid);
      const start = Date.now();
      const { posted, requests } = await openLoop({
        ingestUrl: ingest.url,
        token: INGEST_TOKEN,
        world: `${organization.slug}/${world.slug}`,
        eventsPerSecond: rate / ENDPOINTS,
        seconds: STEADY_SECONDS,
      });
      const received = await receiverReached(receiver.origin, posted * ENDPOINTS);
      const thread = threadShares(threadBefore, mainThreadTime(worker.child.pid));
      const after = await soFar();
      return {
        rate,
        posted,
        requests,
        received,
        seconds: (received.lastAt - start) / 1000,
        thread,
        transactions: after.intakeBatches - before.intakeBatches,
        cpu: cpuPer(before, after, posted * ENDPOINTS),
        redis: redisPer(before, after, posted * ENDPOINTS),
      };
    };

    /** Prints an open loop's lag and costs beside a burst's (`total`: the burst's CPU per delivery). */
    const reportOpenLoop = (
      title: string,
      run: Awaited<ReturnType<typeof openLoopRun>>,
      burst: Pick<Awaited<ReturnType<typeof endToEnd>>, "redis" | "thread" | "seconds" | "expected"> & { total: number },
    ): void => {
      const fmt = (n: number): string => n.toFixed(0);
      const deliveries = run.posted * ENDPOINTS;
      log(`${title} (${fmt(run.rate)} deliveries/s offered for ${STEADY_SECONDS} s, ${fmt(deliveries / run.seconds)}/s received):`);
      goals.judge(run.received.p99 < 1000);
      log(`  lag from intake to receiver: p50 ${fmt(run.received.p50)} ms, p99 ${fmt(run.received.p99)} ms (goal p99 < 1000 ms)`);
      // The requests' size follows the offered rate (what is due every tick): a slower machine's
      // lower maximum means smaller requests, whose per-request costs weigh more per delivery.
      log(
        `  ${run.requests} requests of ${(run.posted / Math.max(1, run.requests)).toFixed(2)} events (${fmt(deliveries / Math.max(1, run.requests))} deliveries) on average; the burst's: ${BATCH} events (${BATCH * ENDPOINTS} deliveries)` +
          `; ingest stored them in ${fmt(run.transactions)} transactions (${(run.requests / Math.max(1, run.transactions)).toFixed(2)} requests each)`,
      );
      // A steady intake costs more per delivery than a burst drained after it (smaller batches in
      // ingest, PostgreSQL and BullMQ, and ingest running beside the worker all along): when these
      // exceed what the offered rate leaves, the run falls behind and its lag grows with the queue.
      const parts = CPU_PARTS.map((name) => [name, run.cpu[name]] as const);
      const total = parts.reduce((sum, [, v]) => sum + v, 0);
      log(
        `  CPU per delivery: ${parts.map(([name, v]) => `${name} ${v.toFixed(3)}`).join(", ")} = ${total.toFixed(3)} ms (${((total / burst.total) * 100).toFixed(0)}% of the burst's)` +
          (run.thread && burst.thread
            ? `; the worker's main thread ran ${(run.thread.ran * 100).toFixed(0)}% of the run (${((run.thread.ran * run.seconds * 1000) / deliveries).toFixed(3)} ms per delivery, ` +
              `burst ${((burst.thread.ran * burst.seconds * 1000) / burst.expected).toFixed(3)} ms) and waited for a core ${(run.thread.waited * 100).toFixed(0)}%`
            : ""),
      );
      log(
        `  ${run.redis.commands.toFixed(1)} Redis commands per delivery (${run.redis.scripts.toFixed(2)} script calls), against the burst's ${burst.redis.commands.toFixed(1)} (${burst.redis.scripts.toFixed(2)})`,
      );
    };

    log(`delivery benchmark: concurrency ${CONCURRENCY}, ${DELIVERIES} deliveries per run, ${ENDPOINTS} endpoints, events in batches of ${BATCH} from ${POSTERS} posters; Node ${process.version} ${RUNTIME_NODE_FLAGS.join(" ")}`);
    // Warm-up: JIT, connection pools, prepared paths.
    await endToEnd(ENDPOINTS, 0, 2000);
    await rawCeiling(receiver.origin, 2000);

    if (STEADY_RATE > 0) {
      // The open loop alone at a given rate, then one burst to compare its costs with: both on
      // this run's machine and its load.
      const run = await openLoopRun(STEADY_RATE);
      const burst = await endToEnd(ENDPOINTS, 0, DELIVERIES);
      const total = CPU_PARTS.reduce((sum, name) => sum + burst.cpu[name], 0);
      log("");
      log(`burst of ${DELIVERIES} deliveries: ${burst.rate.toFixed(0)} deliveries/s`);
      log(`  CPU per delivery: ${CPU_PARTS.map((name) => `${name} ${burst.cpu[name].toFixed(3)}`).join(", ")} = ${total.toFixed(3)} ms`);
      reportOpenLoop("open loop", run, { ...burst, total });
      if (ingestRetries.count > 0) log(`(ingest answered 503 ${ingestRetries.count} times under the machine's load; retried)`);
      log(goals.summary());
      return;
    }

    // The ceiling and the end-to-end run alternate, ROUNDS times, and their medians are compared:
    // on a shared machine one run of either moves by a fifth from one minute to the next.
    const raws: Awaited<ReturnType<typeof rawCeiling>>[] = [];
    const healthyRuns: Awaited<ReturnType<typeof endToEnd>>[] = [];
    const rawReceiverCpu: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const receiverBefore = (await receiverStats(receiver.origin)).cpuMs;
      raws.push(await rawCeiling(receiver.origin, DELIVERIES));
      rawReceiverCpu.push(((await receiverStats(receiver.origin)).cpuMs - receiverBefore) / DELIVERIES);
      healthyRuns.push(await endToEnd(ENDPOINTS, 0, DELIVERIES));
    }
    const raw = median(raws.map((r) => r.rate));
    const healthyRun = [...healthyRuns].sort((a, b) => a.rate - b.rate)[Math.floor(ROUNDS / 2)]!;
    const noop = await noopBullmq(DELIVERIES);
    const hungCount = Math.max(1, Math.round(ENDPOINTS / 10));
    const hangRun = await endToEnd(ENDPOINTS - hungCount, hungCount, DELIVERIES);

    // Open loop at 80% of the measured end-to-end maximum: the latency a receiver sees at a rate
    // the platform sustains, from the event's intake (its timestamp, set when posted) to arrival.
    const steadyRun = await openLoopRun(healthyRun.rate * 0.8);

    const fmt = (n: number): string => n.toFixed(0);
    log("");
    const each = (rates: number[]): string => (ROUNDS > 1 ? `  (median of ${ROUNDS} rounds: ${rates.map(fmt).join(", ")})` : "");
    log(`raw ceiling (signed POSTs, no queue, no log):   ${fmt(raw)} POSTs/s${each(raws.map((r) => r.rate))}`);
    const rawClient = median(raws.map((r) => r.cpuMs));
    const rawReceiver = median(rawReceiverCpu);
    log(`  CPU per POST (median): client ${rawClient.toFixed(3)} ms, receiver ${rawReceiver.toFixed(3)} ms = ${(rawClient + rawReceiver).toFixed(3)} ms`);
    log(`no-op BullMQ jobs (same concurrency):               ${fmt(noop.rate)} jobs/s, CPU per job ${noop.cpuMs.toFixed(3)} ms (worker and Redis)`);
    log(`end to end, all ${ENDPOINTS} endpoints healthy:           ${fmt(healthyRun.rate)} deliveries/s${each(healthyRuns.map((r) => r.rate))}`);
    log(`  ingest accepted the events at ${fmt(healthyRun.ingestRate)} deliveries/s; jobs parked by the worker (window full): ${healthyRuns.map((r) => r.parked).join(", ")}`);
    const part = (name: keyof (typeof healthyRun)["cpu"]): number => median(healthyRuns.map((r) => r.cpu[name]));
    const parts = CPU_PARTS.map((name) => [name, part(name)] as const);
    const total = parts.reduce((sum, [, v]) => sum + v, 0);
    log(
      `  CPU per delivery (median): ${parts.map(([name, v]) => `${name} ${v.toFixed(3)}`).join(", ")} = ${total.toFixed(3)} ms` +
        " (postgres: its processes alive at both ends of the run)",
    );
    const redisOf = (r: { commands: number; scripts: number }): string => `${r.commands.toFixed(1)} Redis commands per delivery (${r.scripts.toFixed(2)} script calls)`;
    log(`  ${redisOf(healthyRun.redis)}`);
    goals.judge(healthyRun.rate / raw >= 0.7);
    log(`  = ${((healthyRun.rate / raw) * 100).toFixed(1)}% of the raw ceiling (goal >= 70%), ${((healthyRun.rate / noop.rate) * 100).toFixed(1)}% of the no-op job rate`);
    // Whether the run was bound by CPU: the ceiling's client runs on about one core, end to end
    // shares every core with PostgreSQL and Redis; below all of them busy, it waited on something.
    const cores = availableParallelism();
    log(
      `  cores busy: ${((healthyRun.rate * total) / 1000).toFixed(2)} of ${cores} (rate x CPU per delivery); ` +
        `70% of the ceiling on ${cores} cores leaves ${((cores * 1000) / (0.7 * raw)).toFixed(3)} ms of CPU per delivery; this run used ${total.toFixed(3)} ms (${(total / (rawClient + rawReceiver)).toFixed(2)}x a raw POST's)`,
    );
    // Both sides are bound by one JavaScript thread: the client's, and the worker's, which shares
    // the cores with PostgreSQL, Redis, ingest and the receiver (it waits for one when they run).
    const shares = (list: (ThreadShares | null)[]): string | null => {
      const known = list.filter((t): t is ThreadShares => t !== null);
      if (known.length === 0) return null;
      const pct = (v: number) => `${(v * 100).toFixed(0)}%`;
      return `ran ${pct(median(known.map((t) => t.ran)))}, waited for a core ${pct(median(known.map((t) => t.waited)))}`;
    };
    const rawThread = shares(raws.map((r) => r.thread));
    const workerThread = shares(healthyRuns.map((r) => r.thread));
    if (rawThread && workerThread) log(`  main JavaScript thread (median): raw-ceiling client ${rawThread}; worker ${workerThread}`);
    log(`  delivery lag (event timestamp -> received): p50 ${fmt(healthyRun.p50)} ms, p99 ${fmt(healthyRun.p99)} ms`);
    log(`end to end, ${hungCount} of ${ENDPOINTS} endpoints never answering:   ${fmt(hangRun.rate)} healthy deliveries/s (jobs parked by the worker: ${hangRun.parked})`);
    goals.judge(hangRun.rate / healthyRun.rate >= 0.8);
    log(`  = ${((hangRun.rate / healthyRun.rate) * 100).toFixed(1)}% of the all-healthy throughput (goal >= 80%)`);
    log(`  delivery lag of healthy endpoints: p50 ${fmt(hangRun.p50)} ms, p99 ${fmt(hangRun.p99)} ms`);
    reportOpenLoop("open loop at 80% of the end-to-end maximum", steadyRun, { ...healthyRun, total });
    if (ingestRetries.count > 0) log(`(ingest answered 503 ${ingestRetries.count} times under the machine's load; retried)`);
    log(goals.summary());
  } finally {
    for (const p of processes) {
      if (process.env.BENCH_PROFILE_DIR) await p.stop();
      else await p.kill9();
    }
    receiver.stop();
    await redis?.quit();
    await deleteKeysUnder(redisUrl, keyPrefix);
    await prisma.$disconnect();
  }
}

if (clusterComparison) {
  const { compareTopologies } = await import("./lib/delivery-cluster.js");
  await compareTopologies();
} else if (process.env.BENCH_TRACING === "1") {
  // Tracing's cost instead (lib/tracing-cost.ts): the same bursts with OpenTelemetry off and on.
  const prisma = createPrismaClient(databaseUrl);
  try {
    await tracingCost({
      prisma,
      databaseUrl,
      redisUrl,
      keyPrefix,
      secretsKey,
      box,
      ingestToken: INGEST_TOKEN,
      concurrency: CONCURRENCY,
      deliveries: DELIVERIES,
      endpoints: ENDPOINTS,
      batch: BATCH,
      posters: POSTERS,
      rounds: ROUNDS,
      log,
    });
  } finally {
    await deleteKeysUnder(redisUrl, keyPrefix);
    await prisma.$disconnect();
  }
} else {
  await main();
}
