/**
 * `pnpm bench backlog`: what one endpoint's backlog costs everybody else, measured on two identical
 * stacks at the same moment. Each stack is event-ingest and one delivery-worker (concurrency 100,
 * endpoint window 10) with a Redis of its own (so `INFO commandstats` counts that stack alone), a
 * database of its own (DATABASE_URL and DATABASE_URL_TWIN) and a receiver process of its own, and
 * 19 healthy endpoints. One stack holds the backlog: a 20th endpoint (a world of its own) with
 * BENCH_BACKLOG (100,000) queued deliveries that it answers in one second each, at most 10 at once.
 * The other holds none. Both are measured together: each unit posts the same burst of
 * BENCH_DELIVERIES healthy deliveries to both at once, then, once both have finished,
 * BENCH_LAG_ROUNDS (2) open-loop rounds of BENCH_LAG_SECONDS (10) to both at once.
 *
 * Why at the same moment: on a shared machine the same code's throughput moves by a fifth or more
 * from one minute to the next (CPU time per delivery too, within one run), so two conditions
 * measured one after the other, even alternated, were decided by when each unit ran. Side by side,
 * a slow spell slows both stacks alike (docs/benchmarks.md, "How the figures are made"). The two
 * stacks share the machine's two cores, so each delivers about half of what one would alone, and a
 * stack whose deliveries cost more CPU gets fewer done: the ratio of their throughputs is the ratio
 * of what a delivery costs them. It is measured over the same window for both: from the burst's start
 * until the first stack has delivered all of it (after that the other has the machine to itself).
 *
 * The backlog sits on the first stack for BENCH_UNITS (3) units, then moves to the second for as
 * many (removed: its world deleted, whose cascade takes its deliveries, pending ones included;
 * queued again through the other stack's ingest), so a difference between the stacks themselves
 * cancels out. A warm-up unit comes first and is not counted.
 *
 * Figures, with and without the backlog: healthy throughput (the median of its units; the goal is
 * on the geometric mean of the units' paired ratios), p99 lag from intake to receiver in the open
 * loop (median of the rounds' p99), Redis commands and Redis time per delivered message, and each
 * process's CPU time per healthy delivery (worker, ingest, its PostgreSQL backends, Redis,
 * receiver).
 * Expects DATABASE_URL and DATABASE_URL_TWIN (scripts/bench.mjs provides both); starts its own
 * redis-servers.
 */
import { randomBytes } from "node:crypto";
import type { Queue } from "bullmq";
import { Redis } from "ioredis";
import { createPrismaClient, type PrismaClient } from "@vw/db";
import { openDeliveryQueues } from "@vw/queues";
import { spawnService, type ServiceProcess } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import {
  backendPids,
  commandCalls,
  commandDelta,
  ingestRetries,
  metricValue,
  openLoop,
  postBurst,
  postgresBackendsBetween,
  postgresCpuSeconds,
  receiverStats,
  redisCpuSeconds,
  resetReceiver,
  startPrivateRedis,
  startReceiver,
} from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { serviceDir } from "./lib/services.js";

const HEALTHY = 19;
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 100_000);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 19_000);
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 10);
const LAG_ROUNDS = Math.max(1, Number(process.env.BENCH_LAG_ROUNDS ?? 2));
const UNITS = Math.max(1, Number(process.env.BENCH_UNITS ?? 3));
const INGEST_TOKEN = "bench-ingest-token-3d7a1f9c5e2b8046";
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);
const log = (msg: string): void => console.log(msg);
const goals = new GoalTally();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The parts whose CPU time is counted per stack, in the order printed. */
const CPU_PARTS = ["worker", "ingest", "postgres", "redis", "receiver"] as const;

/** One stack: its services, stores and healthy world. */
interface Stack {
  label: string;
  databaseUrl: string;
  prisma: PrismaClient;
  redis: Redis;
  queue: Queue;
  queueConnection: Redis;
  receiver: { origin: string; stop: () => void };
  ingest: ServiceProcess;
  worker: ServiceProcess;
  healthy: { name: string };
  organization: { id: string; slug: string };
  backlog: { worldId: string; endpointId: string } | null;
  stopRedis: () => Promise<void>;
}

/** What one stack did in one unit. */
interface Share {
  /** Healthy deliveries per second over the unit's common window. */
  rate: number;
  /** p99 lag of the burst (its drain time). */
  burstP99: number;
  commands: number;
  commandsByName: Map<string, number>;
  microsByName: Map<string, number>;
  /** Messages delivered during the burst (the slow endpoint's included). */
  delivered: number;
  slowDelivered: number;
  cpu: Map<string, number>;
  lagP99s: number[];
  lagP50s: number[];
}

/** The median (of an even count, the mean of the middle two). */
const medianOf = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length === 0 ? 0 : sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const geoMean = (xs: number[]): number => Math.exp(xs.reduce((sum, x) => sum + Math.log(x), 0) / xs.length);

async function startStack(label: string, databaseUrl: string): Promise<Stack> {
  const redisServer = await startPrivateRedis();
  const keyPrefix = `vwbench-${randomBytes(4).toString("hex")}`;
  const redis = new Redis(redisServer.url);
  const queueConnection = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  // One delivery shard: the bench reads one queue's counts and one scheduler's keys, as before sharding.
  const queue = openDeliveryQueues(queueConnection, keyPrefix, 1).shards[0] as Queue;
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startReceiver();
  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redisServer.url, REDIS_KEY_PREFIX: keyPrefix, QUEUE_SHARDS: "1", LOG_LEVEL: "warn", SECRETS_ENCRYPTION_KEY: secretsKey };
  const started = await Promise.allSettled([
    spawnService(serviceDir("event-ingest"), { ...env, INGEST_TOKEN, MAX_EVENTS_PER_REQUEST: "1000" }),
    spawnService(serviceDir("delivery-worker"), { ...env, ENDPOINT_URL_POLICY: "any", DELIVERY_CONCURRENCY: "100", DELIVERY_ENDPOINT_CONCURRENCY: "10" }),
  ]);
  if (started.some((s) => s.status === "rejected")) {
    for (const s of started) if (s.status === "fulfilled") await s.value.kill9();
    await queue.close();
    queueConnection.disconnect();
    redis.disconnect();
    receiver.stop();
    await redisServer.stop();
    await prisma.$disconnect();
    throw (started.find((s) => s.status === "rejected") as PromiseRejectedResult).reason;
  }
  const [ingest, worker] = started.map((s) => (s as PromiseFulfilledResult<ServiceProcess>).value) as [ServiceProcess, ServiceProcess];
  const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
  const stack: Stack = {
    label,
    databaseUrl,
    prisma,
    redis,
    queue,
    queueConnection,
    receiver,
    ingest,
    worker,
    healthy: { name: "" },
    organization,
    backlog: null,
    stopRedis: redisServer.stop,
  };
  stack.healthy = await createWorld(stack, Array.from({ length: HEALTHY }, (_, i) => `ok/${i}`));
  return stack;
}

async function createWorld(stack: Stack, paths: string[]): Promise<{ id: string; name: string; endpointIds: string[] }> {
  const { prisma } = stack;
  const w = await prisma.world.create({ data: { organizationId: stack.organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
  const endpointIds: string[] = [];
  for (const path of paths) {
    const e = await prisma.webhookEndpoint.create({
      data: { worldId: w.id, url: `${stack.receiver.origin}/${path}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
    });
    endpointIds.push(e.id);
  }
  return { id: w.id, name: `${stack.organization.slug}/${w.slug}`, endpointIds };
}

/** Queues BACKLOG deliveries for a new slow endpoint of the stack, through its ingest, and waits until every one is stored. */
async function queueBacklog(stack: Stack): Promise<void> {
  const slow = await createWorld(stack, ["slow/0"]);
  const endpointId = slow.endpointIds[0]!;
  stack.backlog = { worldId: slow.id, endpointId };
  const started = Date.now();
  await postBurst(stack.ingest.url, INGEST_TOKEN, slow.name, BACKLOG, 1000, 4);
  const [row] = await stack.prisma.$queryRawUnsafe<{ pending: number }[]>(
    "SELECT count(*)::int AS pending FROM delivery_states WHERE endpoint_id = $1::uuid AND status = 'pending'",
    endpointId,
  );
  log(`  backlog of ${BACKLOG} queued on stack ${stack.label} in ${((Date.now() - started) / 1000).toFixed(1)} s (${row?.pending ?? 0} pending)`);
}

/** Takes the stack's backlog away: its world, whose cascade takes its endpoint and every delivery of it; its drain then finds nothing. */
async function removeBacklog(stack: Stack): Promise<void> {
  if (stack.backlog === null) return;
  const started = Date.now();
  await stack.prisma.world.delete({ where: { id: stack.backlog.worldId } });
  stack.backlog = null;
  for (;;) {
    const [active, stats] = await Promise.all([stack.queue.getActiveCount(), receiverStats(stack.receiver.origin)]);
    if (active === 0 && stats.slowInFlight === 0) break;
    await sleep(200);
  }
  log(`  backlog removed from stack ${stack.label} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** CPU seconds so far of each part of a stack but PostgreSQL (see postgresBackendsBetween in bench-kit). */
async function cpuNow(stack: Stack): Promise<Map<string, number>> {
  return new Map<string, number>([
    ["worker", await metricValue(stack.worker, "process_cpu_seconds_total")],
    ["ingest", await metricValue(stack.ingest, "process_cpu_seconds_total")],
    ["redis", await redisCpuSeconds(stack.redis)],
    ["receiver", (await receiverStats(stack.receiver.origin)).cpuMs / 1000],
  ]);
}

/**
 * One unit on both stacks at once: the burst (posted to both together; each stack's throughput over
 * the window until the first has delivered all of it), then the open-loop rounds (both together).
 */
async function unit(stacks: [Stack, Stack], expected: number, events: number, lagEventsPerSecond: number): Promise<[Share, Share]> {
  for (const s of stacks) {
    // From a checkpointed database with fresh statistics (queuing or removing a backlog has just
    // written or deleted 100,000 rows, and this machine's PostgreSQL runs without autovacuum).
    await s.prisma.$executeRawUnsafe("VACUUM ANALYZE webhook_events, webhook_event_keys, webhook_deliveries, delivery_states, delivery_attempts, endpoint_stats");
  }
  await stacks[0].prisma.$executeRawUnsafe("CHECKPOINT");
  await Promise.all(stacks.map((s) => resetReceiver(s.receiver.origin)));
  const pg0 = postgresCpuSeconds();
  const cpu0 = await Promise.all(stacks.map((s) => cpuNow(s)));
  const calls0 = await Promise.all(stacks.map((s) => commandCalls(s.redis)));
  const start = Date.now();
  const posting = Promise.all(stacks.map((s) => postBurst(s.ingest.url, INGEST_TOKEN, s.healthy.name, events, 100, 4)));
  // The common window: until the first stack has all of its burst; then each one's count.
  let window: { ms: number; counts: number[] } | null = null;
  for (;;) {
    const counts = await Promise.all(stacks.map(async (s) => Number(await (await fetch(`${s.receiver.origin}/_count`)).text())));
    const now = Date.now();
    if (window === null && counts.some((c) => c >= expected)) window = { ms: now - start, counts };
    if (counts.every((c) => c >= expected)) break;
    await sleep(100);
  }
  await posting;
  const stats = await Promise.all(stacks.map((s) => receiverStats(s.receiver.origin)));
  const pg1 = postgresCpuSeconds();
  const cpu1 = await Promise.all(stacks.map((s) => cpuNow(s)));
  const backends = await Promise.all(stacks.map((s) => backendPids(s.prisma)));
  const calls1 = await Promise.all(stacks.map((s) => commandCalls(s.redis)));
  const shares = stacks.map((_, i): Share => {
    const commands = commandDelta(calls0[i]!, calls1[i]!);
    const cpu = new Map<string, number>();
    for (const [part, seconds] of cpu1[i]!) cpu.set(part, seconds - cpu0[i]!.get(part)!);
    cpu.set("postgres", postgresBackendsBetween(backends[i]!, pg0, pg1));
    return {
      rate: Math.min(expected, window!.counts[i]!) / (window!.ms / 1000),
      burstP99: stats[i]!.p99,
      commands: commands.total,
      commandsByName: new Map(commands.all),
      microsByName: new Map(commands.usec),
      delivered: expected + stats[i]!.slow,
      slowDelivered: stats[i]!.slow,
      cpu,
      lagP99s: [],
      lagP50s: [],
    };
  }) as [Share, Share];
  // Settled: no drain waiting to start (running ones may linger for more), then a second more, so
  // the first round does not meet the burst's last log writes.
  for (;;) {
    const busy = await Promise.all(stacks.map(async (s) => (await s.queue.getWaitingCount()) > 0));
    if (!busy.includes(true)) break;
    await sleep(100);
  }
  await sleep(1000);
  if (lagEventsPerSecond > 0) {
    for (let round = 0; round < LAG_ROUNDS; round += 1) {
      await Promise.all(stacks.map((s) => resetReceiver(s.receiver.origin)));
      const posted = await Promise.all(
        stacks.map((s) => openLoop({ ingestUrl: s.ingest.url, token: INGEST_TOKEN, world: s.healthy.name, eventsPerSecond: lagEventsPerSecond, seconds: LAG_SECONDS })),
      );
      for (const [i, s] of stacks.entries()) {
        while (Number(await (await fetch(`${s.receiver.origin}/_count`)).text()) < posted[i]!.posted * HEALTHY) await sleep(100);
        const lag = await receiverStats(s.receiver.origin);
        shares[i]!.lagP99s.push(lag.p99);
        shares[i]!.lagP50s.push(lag.p50);
      }
    }
  }
  return shares;
}

/** A condition's shares taken together. */
interface Condensed {
  rate: number;
  rates: number[];
  burstP99: number;
  lagP50: number;
  lagP99: number;
  lagP99s: number[];
  commandsPerMessage: number;
  topCommands: string;
  topMicros: string;
  slowDelivered: number;
  cpuMsPerDelivery: Map<string, number>;
  cpuMsTotal: number;
}

function condense(shares: Share[], healthyPerBurst: number): Condensed {
  const healthyDelivered = shares.length * healthyPerBurst;
  const delivered = shares.reduce((sum, s) => sum + s.delivered, 0);
  const cpuMsPerDelivery = new Map<string, number>();
  for (const part of CPU_PARTS) cpuMsPerDelivery.set(part, (shares.reduce((sum, s) => sum + s.cpu.get(part)!, 0) * 1000) / healthyDelivered);
  const sum = (pick: (s: Share) => Map<string, number>): Map<string, number> => {
    const total = new Map<string, number>();
    for (const s of shares) for (const [name, n] of pick(s)) total.set(name, (total.get(name) ?? 0) + n);
    return total;
  };
  const top = (m: Map<string, number>, digits: number): string =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([name, n]) => `${name} ${(n / delivered).toFixed(digits)}`)
      .join(", ");
  const lagP99s = shares.flatMap((s) => s.lagP99s);
  return {
    rate: medianOf(shares.map((s) => s.rate)),
    rates: shares.map((s) => s.rate),
    burstP99: medianOf(shares.map((s) => s.burstP99)),
    lagP50: medianOf(shares.flatMap((s) => s.lagP50s)),
    lagP99: medianOf(lagP99s),
    lagP99s,
    commandsPerMessage: shares.reduce((n, s) => n + s.commands, 0) / delivered,
    topCommands: top(sum((s) => s.commandsByName), 1),
    topMicros: top(sum((s) => s.microsByName), 1),
    slowDelivered: shares.reduce((n, s) => n + s.slowDelivered, 0),
    cpuMsPerDelivery,
    cpuMsTotal: [...cpuMsPerDelivery.values()].reduce((a, b) => a + b, 0),
  };
}

async function main(): Promise<void> {
  const twinUrl = process.env.DATABASE_URL_TWIN;
  if (!twinUrl) throw new Error("DATABASE_URL_TWIN is not set: run it as `pnpm bench backlog` (scripts/bench.mjs creates the second database)");
  const stacks: Stack[] = [];
  try {
    stacks.push(await startStack("1", process.env.DATABASE_URL!));
    stacks.push(await startStack("2", twinUrl));
    const pair = stacks as [Stack, Stack];
    const events = Math.ceil(DELIVERIES / HEALTHY);
    const expected = events * HEALTHY;
    log(
      `backlog benchmark: two identical stacks measured at the same moment, ${HEALTHY} healthy endpoints each; one holds a backlog of ${BACKLOG} on one endpoint answering in 1 s, window 10` +
        `, for ${UNITS} units on each stack in turn; ` +
        `each unit a burst of ${expected} healthy deliveries to both, then ${LAG_ROUNDS} x ${LAG_SECONDS} s open loop to both at half a stack's burst throughput`,
    );
    // Warm-up (JIT, pools, caches, the tables' first pages); it also sets the open loop's rate:
    // half of what a stack delivers beside the other.
    const warm = await unit(pair, expected, events, 0);
    const lagEventsPerSecond = (((warm[0].rate + warm[1].rate) / 2) * 0.5) / HEALTHY;
    const loaded: Share[] = [];
    const quiet: Share[] = [];
    const ratios: number[] = [];
    for (const [phase, withBacklog] of [pair[0], pair[1]].entries()) {
      const without = pair[1 - phase]!;
      await removeBacklog(without);
      await queueBacklog(withBacklog);
      for (let u = 0; u < UNITS; u += 1) {
        const shares = await unit(pair, expected, events, lagEventsPerSecond);
        const mine = shares[phase]!;
        const other = shares[1 - phase]!;
        loaded.push(mine);
        quiet.push(other);
        ratios.push(mine.rate / other.rate);
        const cpuMs = (s: Share): string => ((([...s.cpu.values()].reduce((x, y) => x + y, 0) * 1000) / expected).toFixed(3));
        log(
          `  unit ${phase * UNITS + u + 1}: with backlog (stack ${withBacklog.label}) ${mine.rate.toFixed(0)}/s, CPU ${cpuMs(mine)} ms, p99 ${mine.lagP99s.map((x) => x.toFixed(0)).join(", ")} ms; ` +
            `without (stack ${without.label}) ${other.rate.toFixed(0)}/s, CPU ${cpuMs(other)} ms, p99 ${other.lagP99s.map((x) => x.toFixed(0)).join(", ")} ms; ratio ${((mine.rate / other.rate) * 100).toFixed(1)}%`,
        );
      }
    }

    const q = condense(quiet, expected);
    const l = condense(loaded, expected);
    const fmt = (n: number, d = 0): string => n.toFixed(d);
    const line = (m: Condensed): string =>
      `healthy ${fmt(m.rate)} deliveries/s beside the other stack (units ${m.rates.map((r) => fmt(r)).join(", ")}; burst p99 ${fmt(m.burstP99)} ms), ` +
      `open loop at ${fmt(lagEventsPerSecond * HEALTHY)}/s: median round lag p50 ${fmt(m.lagP50)} ms, p99 ${fmt(m.lagP99)} ms (p99 per round ${m.lagP99s.map((x) => fmt(x)).join(", ")}); ` +
      `${fmt(m.commandsPerMessage, 2)} Redis commands per delivered message`;
    log("");
    log(`no backlog:   ${line(q)}`);
    log(`with backlog: ${line(l)} (${l.slowDelivered} slow deliveries during the bursts)`);
    if (ingestRetries.count > 0) log(`  (ingest answered 503 ${ingestRetries.count} times under the machine's load; retried)`);
    log(`  per message, no backlog: ${q.topCommands}`);
    log(`  per message, with backlog: ${l.topCommands}`);
    log(`  Redis µs per message (wall time in Redis, scripts' commands inside evalsha's), no backlog: ${q.topMicros}`);
    log(`  Redis µs per message, with backlog: ${l.topMicros}`);
    const cpuLine = (m: Condensed): string => `${[...m.cpuMsPerDelivery].map(([part, ms]) => `${part} ${fmt(ms, 3)}`).join(", ")}; in all ${fmt(m.cpuMsTotal, 3)}`;
    log(`  CPU ms per healthy delivery during the bursts, no backlog: ${cpuLine(q)}`);
    log(`  CPU ms per healthy delivery during the bursts, with backlog: ${cpuLine(l)}`);
    log(`  paired throughput ratios (with / without, same window): ${ratios.map((r) => fmt(r * 100, 1)).join(", ")}%`);
    const throughputRatio = geoMean(ratios);
    const lagRatio = l.lagP99 / Math.max(1, q.lagP99);
    const commandsRatio = l.commandsPerMessage / q.commandsPerMessage;
    goals.judge(throughputRatio >= 0.95);
    log(`  healthy throughput with backlog = ${fmt(throughputRatio * 100, 1)}% of no backlog (goal >= 95%)`);
    goals.judge(lagRatio <= 1.2);
    log(`  healthy p99 lag with backlog = ${fmt(lagRatio, 2)}x no backlog (goal <= 1.2x)`);
    goals.judge(commandsRatio <= 1.5);
    log(`  Redis commands per delivered message with backlog = ${fmt(commandsRatio, 2)}x no backlog (goal <= 1.5x)`);
    log(`  CPU per healthy delivery with backlog = ${fmt((l.cpuMsTotal / Math.max(1e-9, q.cpuMsTotal)) * 100, 1)}% of no backlog`);
    log(goals.summary());
  } finally {
    for (const s of stacks) {
      await s.queue.close();
      s.queueConnection.disconnect();
      await s.worker.kill9();
      await s.ingest.kill9();
      s.receiver.stop();
      s.redis.disconnect();
      await s.stopRedis();
      await s.prisma.$disconnect();
    }
  }
}

await main();
