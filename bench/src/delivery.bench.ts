/**
 * `pnpm bench delivery`: events through event-ingest -> PostgreSQL and Redis -> one delivery-worker
 * process -> a receiver in its own process, with the attempt log on. The yardstick is CPU per
 * delivery, summed over every process of the pipeline (worker, ingest, PostgreSQL, Redis,
 * receiver), as a multiple of one raw signed POST's (client + receiver: webhook-core's
 * `sendAttempt` with no queue and no log) measured in the same run on the same receiver: that
 * multiple does not depend on how fast the machine is that day (docs/decisions/0017). Scenarios:
 * - burst: events in batches of BATCH to a world of ENDPOINTS endpoints, alternating ROUNDS times
 *   with the raw POSTs (medians compared), with Redis commands per delivery;
 * - the same burst with a tenth of the endpoints never answering: healthy throughput against the
 *   all-healthy burst's;
 * - open loop at 80% of the burst's maximum for BENCH_STEADY_SECONDS (small requests, as a steady
 *   producer posts them): lag from intake to receiver, and its CPU per delivery;
 * - many small worlds: BENCH_SMALL_WORLDS worlds of 2 endpoints, one event per request, at 50% of
 *   the burst's maximum: what a platform's traffic looks like; measured after
 *   BENCH_SMALL_WARMUP_SECONDS of the same traffic, whose lag is printed as the cold start;
 * - QUEUE_SHARDS at its default against 1: bursts alternated on two fresh pairs of services.
 * The run uses a Redis of its own (INFO counts only its commands) and counts PostgreSQL's CPU of
 * its database's backends and the server's background writers only. The services run with the
 * flags they are deployed with (RUNTIME_NODE_FLAGS); so does the raw POSTs' client, which runs in
 * this process: the benchmark starts itself again with them when it was started without.
 * With BENCH_TRACING=1 it measures OpenTelemetry's cost instead: the same bursts through a pair
 * of services with tracing off and a pair exporting every span (lib/tracing-cost.ts).
 * With BENCH_PROFILE_DIR, each service writes CPU profiles there when stopped.
 * Expects DATABASE_URL and REDIS_URL (scripts/bench.mjs provides them).
 *
 * `BENCH_REDIS=cluster` runs the burst instead on two stacks side by side, one on a standalone
 * Redis and one on a 3-primary Redis Cluster, both started here, and compares their throughput,
 * Redis commands per delivery and how the Cluster's primaries share them (lib/delivery-cluster.ts;
 * scripts/bench.mjs then also provides DATABASE_URL_CLUSTER).
 */
import { spawnSync } from "node:child_process";
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
  openLoopWorlds,
  postBurst,
  ingestRetries,
  postgresCpuBetween,
  postgresCpuOf,
  receiverReached,
  receiverStats,
  redisCpuSeconds,
  commandCalls,
  commandDelta,
  resetReceiver,
  startPrivateRedis,
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
/** Worlds of the many-small-worlds scenario (2 endpoints each). */
const SMALL_WORLDS = Number(process.env.BENCH_SMALL_WORLDS ?? 500);
/**
 * Seconds the small worlds' traffic runs before it is measured: their 1,000 endpoints are new to
 * the worker, and each first event starts a drain (a BullMQ job) that then lingers for the next
 * one. That cold start is reported on its own line; the goals are judged on the traffic after it.
 */
const SMALL_WARMUP_SECONDS = Number(process.env.BENCH_SMALL_WARMUP_SECONDS ?? 5);
/**
 * BENCH_ONLY=small: after the warm-up, only the raw POSTs and the many-small-worlds scenario, at
 * BENCH_SMALL_RATE deliveries/s (to profile it with BENCH_PROFILE_DIR, say); BENCH_ONLY=burst: only
 * the raw POSTs and BENCH_ROUNDS bursts in a row. Goals are not judged then.
 */
const ONLY_SMALL = process.env.BENCH_ONLY === "small";
const ONLY_BURST = process.env.BENCH_ONLY === "burst";
const SMALL_RATE = Number(process.env.BENCH_SMALL_RATE ?? 1000);
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
async function noopBullmq(url: string, total: number): Promise<{ rate: number; cpuMs: number }> {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
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

/** CPU ms per delivery of each process of the pipeline. */
type CpuParts = Record<(typeof CPU_PARTS)[number], number>;

/**
 * The yardstick line of a scenario: its CPU per delivery over every process as a multiple of one
 * raw signed POST's (client + receiver, measured in the same run), judged against `goal`.
 */
function yardstick(cpu: CpuParts, rawPostMs: number, goal: number): string {
  const total = CPU_PARTS.reduce((sum, name) => sum + cpu[name], 0);
  const multiple = total / rawPostMs;
  goals.judge(multiple <= goal);
  return `CPU per delivery: ${CPU_PARTS.map((name) => `${name} ${cpu[name].toFixed(3)}`).join(", ")} = ${total.toFixed(3)} ms (${multiple.toFixed(2)}x a raw POST's; goal <= ${goal.toFixed(1)}x)`;
}

async function main(): Promise<void> {
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startReceiver();
  // A Redis of the run's own: INFO counts only this run's commands and CPU, whatever else the
  // machine's Redis serves meanwhile.
  const redisServer = await startPrivateRedis();
  const processes: ServiceProcess[] = [];
  let redis: Redis | undefined;
  try {
    const commonEnv = { DATABASE_URL: databaseUrl, REDIS_URL: redisServer.url, LOG_LEVEL: "warn", SECRETS_ENCRYPTION_KEY: secretsKey };
    /** An event-ingest and a delivery-worker on their own key prefix (and `extra` settings). */
    const startPair = async (tag: string, extra: Record<string, string> = {}) => {
      const env = { ...commonEnv, REDIS_KEY_PREFIX: `${keyPrefix}-${tag}`, ...extra };
      const ingest = await spawnService(serviceDir("event-ingest"), { ...env, INGEST_TOKEN }, { nodeArgs: profileArgs(`ingest-${tag}`) });
      processes.push(ingest);
      const worker = await spawnService(
        serviceDir("delivery-worker"),
        { ...env, ENDPOINT_URL_POLICY: "any", DELIVERY_CONCURRENCY: String(CONCURRENCY) },
        { nodeArgs: profileArgs(`worker-${tag}`) },
      );
      processes.push(worker);
      return { ingest, worker };
    };
    const main = await startPair("main");
    const stats = new Redis(redisServer.url);
    redis = stats;
    const databaseName = new URL(databaseUrl).pathname.slice(1);
    /** What the processes of `pair` have done so far: CPU seconds of each, Redis commands. */
    const soFar = async (pair: Awaited<ReturnType<typeof startPair>>) => {
      const [workerCpu] = (await metricValues(pair.worker, ["process_cpu_seconds_total"])) as [number];
      // intakeBatches: intake transactions of ingest so far (vw_ingest_batch_requests: its count).
      const [ingestCpu, intakeBatches] = (await metricValues(pair.ingest, ["process_cpu_seconds_total", "vw_ingest_batch_requests_count"])) as [number, number];
      return {
        workerCpu,
        ingestCpu,
        intakeBatches,
        receiverCpu: (await receiverStats(receiver.origin)).cpuMs / 1000,
        redisCpu: await redisCpuSeconds(stats),
        postgresCpu: postgresCpuOf(databaseName),
        redisCalls: await commandCalls(stats),
      };
    };
    type Reading = Awaited<ReturnType<typeof soFar>>;
    /** CPU ms per item of each process between two readings. */
    const cpuPer = (before: Reading, after: Reading, items: number): CpuParts => ({
      worker: ((after.workerCpu - before.workerCpu) * 1000) / items,
      ingest: ((after.ingestCpu - before.ingestCpu) * 1000) / items,
      receiver: ((after.receiverCpu - before.receiverCpu) * 1000) / items,
      redis: ((after.redisCpu - before.redisCpu) * 1000) / items,
      postgres: (postgresCpuBetween(before.postgresCpu, after.postgresCpu) * 1000) / items,
    });
    /** Redis commands per item between two readings (scripts' own commands included; this benchmark's polling left out), and script calls. */
    const redisPer = (before: Reading, after: Reading, items: number) => {
      const delta = new Map(commandDelta(before.redisCalls, after.redisCalls).all);
      const polling = (delta.get("info") ?? 0) + (delta.get("ping") ?? 0);
      const total = [...delta.values()].reduce((sum, n) => sum + n, 0) - polling;
      const top = [...delta].filter(([name]) => name !== "info" && name !== "ping").sort((a, b) => b[1] - a[1]).slice(0, 8);
      return {
        commands: total / items,
        scripts: ((delta.get("evalsha") ?? 0) + (delta.get("eval") ?? 0)) / items,
        top: top.map(([name, n]) => `${name} ${(n / items).toFixed(2)}`).join(", "),
      };
    };

    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
    /** A world with `healthy` + `hung` endpoints on the receiver. */
    const createWorld = async (healthy: number, hung: number) => {
      const world = await prisma.world.create({ data: { organizationId: organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
      await prisma.webhookEndpoint.createMany({
        data: Array.from({ length: healthy + hung }, (_, i) => ({
          worldId: world.id,
          url: `${receiver.origin}/${i < healthy ? "ok" : "hang"}/${world.slug}-${i}`,
          subscriptions: ["visitor"],
          format: "current",
          apiVersion: "2026-11-01",
          secretSealed: box.seal(generateSecret()),
        })),
      });
      return `${organization.slug}/${world.slug}`;
    };

    /**
     * The small worlds, then ANALYZE: on a platform they were created over days and the planner's
     * statistics know them; created the second before the traffic, a plan cached while there were
     * twenty worlds would scan all 500 on every intake.
     */
    const createSmallWorlds = async (): Promise<string[]> => {
      const worlds: string[] = [];
      for (let i = 0; i < SMALL_WORLDS; i += 1) worlds.push(await createWorld(2, 0));
      await prisma.$executeRawUnsafe("ANALYZE organizations, worlds, webhook_endpoints");
      return worlds;
    };

    /** One burst: events in batches of BATCH from POSTERS posters, until `deliveries` healthy deliveries arrived. */
    const burst = async (pair: Awaited<ReturnType<typeof startPair>>, healthy: number, hung: number, deliveries: number) => {
      const world = await createWorld(healthy, hung);
      await resetReceiver(receiver.origin);
      const events = Math.ceil(deliveries / healthy);
      const expected = events * healthy;
      const before = await soFar(pair);
      const threadBefore = mainThreadTime(pair.worker.child.pid);
      const start = Date.now();
      await postBurst(pair.ingest.url, INGEST_TOKEN, world, events, BATCH, POSTERS);
      const ingestSeconds = (Date.now() - start) / 1000;
      const s = await receiverReached(receiver.origin, expected);
      const thread = threadShares(threadBefore, mainThreadTime(pair.worker.child.pid));
      const seconds = (s.lastAt - start) / 1000;
      const after = await soFar(pair);
      return { expected, rate: expected / seconds, seconds, ingestRate: expected / ingestSeconds, p50: s.p50, p99: s.p99, cpu: cpuPer(before, after, expected), redis: redisPer(before, after, expected), thread };
    };

    /** An open loop of `post` at a steady rate for STEADY_SECONDS, until all `expected(posted)` deliveries were received. */
    const steady = async (post: () => Promise<{ posted: number; requests: number }>, deliveriesOf: (posted: number) => number) => {
      await resetReceiver(receiver.origin);
      const before = await soFar(main);
      const start = Date.now();
      const { posted, requests } = await post();
      const deliveries = deliveriesOf(posted);
      const received = await receiverReached(receiver.origin, deliveries);
      const after = await soFar(main);
      return {
        deliveries,
        requests,
        received,
        seconds: (received.lastAt - start) / 1000,
        transactions: after.intakeBatches - before.intakeBatches,
        cpu: cpuPer(before, after, deliveries),
        redis: redisPer(before, after, deliveries),
      };
    };

    /**
     * The small worlds' open loop at `rate` deliveries/s: SMALL_WARMUP_SECONDS of it (the cold
     * start), then STEADY_SECONDS measured. The pause between the two is the last delivery's lag,
     * well within a drain's linger, so the drains started by the warm-up carry on.
     */
    const smallWorlds = async (worlds: string[], rate: number) => {
      const loop = (seconds: number) => () => openLoopWorlds({ ingestUrl: main.ingest.url, token: INGEST_TOKEN, worlds, eventsPerSecond: rate / 2, seconds });
      const cold = await steady(loop(SMALL_WARMUP_SECONDS), (posted) => posted * 2);
      const run = await steady(loop(STEADY_SECONDS), (posted) => posted * 2);
      return { cold, run };
    };
    const coldStartLine = (cold: Awaited<ReturnType<typeof steady>>): string =>
      `cold start, the first ${SMALL_WARMUP_SECONDS} s (a drain starting for each of ${SMALL_WORLDS * 2} endpoints new to the worker; not judged): ` +
      `p50 ${cold.received.p50.toFixed(0)} ms, p99 ${cold.received.p99.toFixed(0)} ms`;

    log(`delivery benchmark: concurrency ${CONCURRENCY}, ${DELIVERIES} deliveries per run, ${ENDPOINTS} endpoints, events in batches of ${BATCH} from ${POSTERS} posters; Node ${process.version} ${RUNTIME_NODE_FLAGS.join(" ")}`);
    // Warm-up: JIT, connection pools, prepared statements.
    await burst(main, ENDPOINTS, 0, 2000);
    await rawCeiling(receiver.origin, 2000);

    if (ONLY_SMALL) {
      const receiverBefore = (await receiverStats(receiver.origin)).cpuMs;
      const raw = await rawCeiling(receiver.origin, DELIVERIES);
      const rawPost = raw.cpuMs + ((await receiverStats(receiver.origin)).cpuMs - receiverBefore) / DELIVERIES;
      const { cold, run } = await smallWorlds(await createSmallWorlds(), SMALL_RATE);
      const total = CPU_PARTS.reduce((sum, name) => sum + run.cpu[name], 0);
      log(`${SMALL_WORLDS} small worlds at ${SMALL_RATE} deliveries/s: p50 ${run.received.p50.toFixed(0)} ms, p99 ${run.received.p99.toFixed(0)} ms`);
      log(`  ${coldStartLine(cold)}`);
      log(`  CPU per delivery: ${CPU_PARTS.map((name) => `${name} ${run.cpu[name].toFixed(3)}`).join(", ")} = ${total.toFixed(3)} ms (${(total / rawPost).toFixed(2)}x a raw POST's)`);
      log(`  ${run.requests} requests in ${run.transactions} intake transactions; ${run.redis.commands.toFixed(2)} Redis commands per delivery: ${run.redis.top}`);
      return;
    }

    if (ONLY_BURST) {
      const receiverBefore = (await receiverStats(receiver.origin)).cpuMs;
      const raw = await rawCeiling(receiver.origin, DELIVERIES);
      const rawPost = raw.cpuMs + ((await receiverStats(receiver.origin)).cpuMs - receiverBefore) / DELIVERIES;
      // BENCH_ROUNDS bursts one after another: how the cost moves as the tables fill.
      for (let round = 0; round < ROUNDS; round += 1) {
        const run = await burst(main, ENDPOINTS, 0, DELIVERIES);
        log(`burst ${round + 1} of ${ROUNDS}, ${ENDPOINTS} endpoints, events in batches of ${BATCH}: ${run.rate.toFixed(0)} deliveries/s`);
        log(`  ${yardstick(run.cpu, rawPost, 2.5)}`);
        log(`  ${run.redis.commands.toFixed(2)} Redis commands per delivery: ${run.redis.top}`);
      }
      return;
    }

    // The ceiling and the burst alternate, ROUNDS times, and their medians are compared: on a
    // shared machine one run of either moves by a fifth from one minute to the next.
    const raws: Awaited<ReturnType<typeof rawCeiling>>[] = [];
    const rawReceiverCpu: number[] = [];
    const bursts: Awaited<ReturnType<typeof burst>>[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const receiverBefore = (await receiverStats(receiver.origin)).cpuMs;
      raws.push(await rawCeiling(receiver.origin, DELIVERIES));
      rawReceiverCpu.push(((await receiverStats(receiver.origin)).cpuMs - receiverBefore) / DELIVERIES);
      bursts.push(await burst(main, ENDPOINTS, 0, DELIVERIES));
    }
    const fmt = (n: number): string => n.toFixed(0);
    const each = (values: number[]): string => (ROUNDS > 1 ? `  (median of ${ROUNDS} rounds: ${values.map(fmt).join(", ")})` : "");
    const rawClient = median(raws.map((r) => r.cpuMs));
    const rawPost = rawClient + median(rawReceiverCpu);
    const burstRate = median(bursts.map((b) => b.rate));
    const burstCpu = Object.fromEntries(CPU_PARTS.map((name) => [name, median(bursts.map((b) => b.cpu[name]))])) as CpuParts;
    const burstRedis = median(bursts.map((b) => b.redis.commands));
    const noop = await noopBullmq(redisServer.url, DELIVERIES);
    log("");
    log(`raw signed POST (no queue, no log):   ${fmt(median(raws.map((r) => r.rate)))} POSTs/s${each(raws.map((r) => r.rate))}`);
    log(`  CPU per POST (median): client ${rawClient.toFixed(3)} ms, receiver ${(rawPost - rawClient).toFixed(3)} ms = ${rawPost.toFixed(3)} ms: the yardstick's unit`);
    log(`no-op BullMQ job (same concurrency):  CPU per job ${noop.cpuMs.toFixed(3)} ms (worker and Redis) = ${(noop.cpuMs / rawPost).toFixed(2)}x a raw POST's`);

    log(`burst, ${ENDPOINTS} endpoints, events in batches of ${BATCH}:   ${fmt(burstRate)} deliveries/s${each(bursts.map((b) => b.rate))}`);
    log(`  ${yardstick(burstCpu, rawPost, 2.5)}`);
    goals.judge(burstRedis <= 15);
    log(`  ${burstRedis.toFixed(2)} Redis commands per delivery (goal <= 15)`);
    const threads = bursts.map((b) => b.thread).filter((t): t is ThreadShares => t !== null);
    if (threads.length > 0) log(`  the worker's main thread ran ${(median(threads.map((t) => t.ran)) * 100).toFixed(0)}% of the run and waited for a core ${(median(threads.map((t) => t.waited)) * 100).toFixed(0)}%`);

    const hungCount = Math.max(1, Math.round(ENDPOINTS / 10));
    const hung = await burst(main, ENDPOINTS - hungCount, hungCount, DELIVERIES);
    goals.judge(hung.rate / burstRate >= 0.8);
    log(`burst with ${hungCount} of ${ENDPOINTS} endpoints never answering: ${fmt(hung.rate)} healthy deliveries/s = ${((hung.rate / burstRate) * 100).toFixed(1)}% of the all-healthy burst's (goal >= 80%)`);

    // Open loop at 80% of the burst's maximum: the latency a receiver sees at a rate the platform
    // sustains, from the event's intake (its timestamp, set when posted) to its arrival.
    const loopWorld = await createWorld(ENDPOINTS, 0);
    const loopRate = burstRate * 0.8;
    const loop = await steady(
      () => openLoop({ ingestUrl: main.ingest.url, token: INGEST_TOKEN, world: loopWorld, eventsPerSecond: loopRate / ENDPOINTS, seconds: STEADY_SECONDS }),
      (posted) => posted * ENDPOINTS,
    );
    const loopReport = (title: string, run: Awaited<ReturnType<typeof steady>>, rate: number, goal: number): void => {
      log(`${title} (${fmt(rate)} deliveries/s offered for ${STEADY_SECONDS} s, ${fmt(run.deliveries / run.seconds)}/s received):`);
      goals.judge(run.received.p99 < 500);
      log(`  lag from intake to receiver: p50 ${fmt(run.received.p50)} ms, p99 ${fmt(run.received.p99)} ms (goal p99 < 500 ms)`);
      log(`  ${yardstick(run.cpu, rawPost, goal)}`);
      log(
        `  ${run.requests} requests (${(run.deliveries / Math.max(1, run.requests)).toFixed(1)} deliveries each) in ${fmt(run.transactions)} intake transactions; ` +
          `${run.redis.commands.toFixed(2)} Redis commands per delivery (${run.redis.scripts.toFixed(2)} script calls)`,
      );
    };
    loopReport("open loop at 80% of the burst's maximum", loop, loopRate, 3.0);

    // Many small worlds: each event of its own request, to one of WORLDS worlds of 2 endpoints.
    const smallRate = burstRate * 0.5;
    const small = await smallWorlds(await createSmallWorlds(), smallRate);
    loopReport(`${SMALL_WORLDS} small worlds of 2 endpoints, one event per request, at 50% of the burst's maximum`, small.run, smallRate, 3.5);
    log(`  ${coldStartLine(small.cold)}`);

    // QUEUE_SHARDS: the default against one shard, on this standalone Redis, burst against burst.
    // Two fresh pairs (the main one has run every scenario above, with their endpoints and rows),
    // alternated ROUNDS times after a warm-up burst each (which goes first alternating too), and
    // the median of each round's ratio: one burst moves by a fifth from one minute to the next, so
    // each round compares two bursts of the same minute.
    const single = await startPair("one-shard", { QUEUE_SHARDS: "1" });
    const sharded = await startPair("sharded");
    await burst(single, ENDPOINTS, 0, 2000);
    await burst(sharded, ENDPOINTS, 0, 2000);
    const totalOf = (cpu: CpuParts): number => CPU_PARTS.reduce((sum, name) => sum + cpu[name], 0);
    const oneShardTotals: number[] = [];
    const shardedTotals: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const one = async () => oneShardTotals.push(totalOf((await burst(single, ENDPOINTS, 0, DELIVERIES)).cpu));
      const many = async () => shardedTotals.push(totalOf((await burst(sharded, ENDPOINTS, 0, DELIVERIES)).cpu));
      if (round % 2 === 0) {
        await one();
        await many();
      } else {
        await many();
        await one();
      }
    }
    const roundRatios = shardedTotals.map((t, i) => t / (oneShardTotals[i] as number));
    const shardRatio = median(roundRatios);
    goals.judge(shardRatio <= 1.1);
    log(
      `QUEUE_SHARDS at its default against 1, bursts alternated: ${median(shardedTotals).toFixed(3)} against ${median(oneShardTotals).toFixed(3)} ms per delivery, median of the rounds' ratios ${shardRatio.toFixed(2)}x (goal <= 1.1x)` +
        (ROUNDS > 1 ? `  (rounds: ${roundRatios.map((r, i) => `${(shardedTotals[i] as number).toFixed(3)}/${(oneShardTotals[i] as number).toFixed(3)} = ${r.toFixed(2)}x`).join(", ")})` : ""),
    );
    if (ingestRetries.count > 0) log(`(ingest answered 503 ${ingestRetries.count} times under the machine's load; retried)`);
    log(goals.summary());
  } finally {
    for (const p of processes) {
      if (process.env.BENCH_PROFILE_DIR) await p.stop();
      else await p.kill9();
    }
    receiver.stop();
    await redis?.quit();
    await redisServer.stop();
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
