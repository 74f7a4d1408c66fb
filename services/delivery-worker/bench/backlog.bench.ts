/**
 * `pnpm bench backlog`: what one endpoint's backlog costs everybody else. event-ingest and one
 * delivery-worker process (concurrency 100, endpoint window 10) against a private Redis (so
 * `INFO commandstats` counts this run only) and the receiver process. 19 healthy endpoints are
 * measured under two conditions:
 *   A. no backlog;
 *   B. a 20th endpoint (a world of its own) holding BENCH_BACKLOG (100,000) queued deliveries that
 *      it answers in one second each, at most 10 at once.
 * The conditions alternate in the order BENCH_ORDER (ABBAABBA): the backlog is queued through ingest
 * before each B that follows an A, and removed before each A that follows a B (its parked set and
 * queued jobs deleted, then its world, which takes its 100,000 rows with it). On this shared
 * machine the throughput of the same code drifts by 20% or more within a few minutes (warm-up,
 * neighbours); measured one condition after the other, that drift decided the result in either
 * direction. The order ABBAABBA cancels a drift that is linear in time, and a slow spell of the
 * machine a unit or two long most often falls on both conditions.
 * Each unit: BENCH_BURSTS (1) bursts of BENCH_DELIVERIES healthy deliveries, then, once the
 * burst's jobs are finished, BENCH_LAG_ROUNDS (2) open-loop rounds of BENCH_LAG_SECONDS (10) at
 * half the first burst's throughput (p50/p99 lag from intake to receiver). A condition's
 * throughput is the median of its bursts, its lag the median of its rounds' p99 (one disturbance
 * does not decide it); its Redis commands per delivered message (the slow endpoint's deliveries
 * included) and the CPU time per healthy delivery of each process (worker, ingest, PostgreSQL,
 * Redis, receiver, this client) are counted over its bursts. CPU time per delivery is the figure
 * the neighbours' load moves least: it says whether the backlog makes the healthy deliveries
 * cost more, where throughput also says how busy the machine was. A warm-up burst of the same
 * size comes first and is not counted.
 * Expects DATABASE_URL (scripts/bench.mjs provides it); starts its own redis-server.
 */
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { createPrismaClient } from "@vw/db";
import { QUEUE_NAMES, bullPrefix } from "@vw/queues";
import { spawnService, type ServiceProcess } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import {
  commandCalls,
  commandDelta,
  ingestRetries,
  metricValue,
  openLoop,
  postBurst,
  postgresCpuBetween,
  postgresCpuSeconds,
  receiverReached,
  receiverStats,
  redisCpuSeconds,
  resetReceiver,
  startPrivateRedis,
  startReceiver,
} from "./bench-kit.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..");
const HEALTHY = 19;
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 100_000);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 19_000);
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 10);
const LAG_ROUNDS = Math.max(1, Number(process.env.BENCH_LAG_ROUNDS ?? 2));
const BURSTS = Math.max(1, Number(process.env.BENCH_BURSTS ?? 1));
const ORDER = (process.env.BENCH_ORDER ?? "ABBAABBA").toUpperCase();
const INGEST_TOKEN = "bench-ingest-token-0123456789";
const keyPrefix = `vwbench-${randomBytes(4).toString("hex")}`;
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);
const log = (msg: string): void => console.log(msg);

type Condition = "A" | "B";

/** One unit of the order: its bursts, then its open-loop rounds. */
interface Unit {
  condition: Condition;
  /** Each burst's throughput (healthy deliveries per second). */
  rates: number[];
  /** Each burst's p99 lag (a burst's lag is its drain time). */
  burstP99s: number[];
  /** Redis commands during the bursts, in all and per command. */
  commands: number;
  commandsByName: Map<string, number>;
  /** Messages delivered during the bursts (the slow endpoint's included). */
  delivered: number;
  slowDelivered: number;
  /** CPU seconds used during the bursts, by part (PostgreSQL's absent where `/proc` cannot be read). */
  cpu: Map<string, number>;
  lagP50s: number[];
  lagP99s: number[];
}

/** The parts whose CPU time is counted, in the order printed. */
const CPU_PARTS = ["worker", "ingest", "postgres", "redis", "receiver", "client"] as const;

/** A condition's units taken together. */
interface Condensed {
  rate: number;
  rates: number[];
  burstP99: number;
  lagP50: number;
  lagP99: number;
  lagP99s: number[];
  commandsPerMessage: number;
  topCommands: string;
  slowDelivered: number;
  /** CPU ms per healthy delivery during the bursts, by part, and their sum. */
  cpuMsPerDelivery: Map<string, number>;
  cpuMsTotal: number;
}

/** The median (of an even count, the mean of the middle two). */
const medianOf = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length === 0 ? 0 : sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

function condense(units: Unit[], healthyPerBurst: number): Condensed {
  const healthyDelivered = units.reduce((sum, u) => sum + u.rates.length * healthyPerBurst, 0);
  const cpuMsPerDelivery = new Map<string, number>();
  for (const part of CPU_PARTS) {
    if (units.every((u) => u.cpu.has(part))) cpuMsPerDelivery.set(part, (units.reduce((sum, u) => sum + u.cpu.get(part)!, 0) * 1000) / healthyDelivered);
  }
  const rates = units.flatMap((u) => u.rates);
  const lagP99s = units.flatMap((u) => u.lagP99s);
  const delivered = units.reduce((sum, u) => sum + u.delivered, 0);
  const byName = new Map<string, number>();
  for (const u of units) for (const [name, n] of u.commandsByName) byName.set(name, (byName.get(name) ?? 0) + n);
  return {
    rate: medianOf(rates),
    rates,
    burstP99: medianOf(units.flatMap((u) => u.burstP99s)),
    lagP50: medianOf(units.flatMap((u) => u.lagP50s)),
    lagP99: medianOf(lagP99s),
    lagP99s,
    commandsPerMessage: units.reduce((sum, u) => sum + u.commands, 0) / delivered,
    topCommands: [...byName]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([name, n]) => `${name} ${(n / delivered).toFixed(1)}`)
      .join(", "),
    slowDelivered: units.reduce((sum, u) => sum + u.slowDelivered, 0),
    cpuMsPerDelivery,
    cpuMsTotal: [...cpuMsPerDelivery.values()].reduce((a, b) => a + b, 0),
  };
}

async function main(): Promise<void> {
  if (!/^A[AB]*$/.test(ORDER) || !ORDER.includes("B")) throw new Error(`BENCH_ORDER must start with A and hold both A and B, got "${ORDER}"`);
  const databaseUrl = process.env.DATABASE_URL!;
  const redisServer = await startPrivateRedis();
  const redis = new Redis(redisServer.url);
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startReceiver();
  const processes: ServiceProcess[] = [];
  const queueConnection = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  const queue = new Queue(QUEUE_NAMES.deliveries, { connection: queueConnection, prefix: bullPrefix(keyPrefix) });
  try {
    const env = { DATABASE_URL: databaseUrl, REDIS_URL: redisServer.url, REDIS_KEY_PREFIX: keyPrefix, LOG_LEVEL: "warn", SECRETS_ENCRYPTION_KEY: secretsKey };
    const ingest = await spawnService(join(root, "services", "event-ingest"), { ...env, INGEST_TOKEN, MAX_EVENTS_PER_REQUEST: "1000" });
    processes.push(ingest);
    const worker = await spawnService(join(root, "services", "delivery-worker"), {
      ...env,
      ENDPOINT_URL_POLICY: "any",
      DELIVERY_CONCURRENCY: "100",
      DELIVERY_ENDPOINT_CONCURRENCY: "10",
    });
    processes.push(worker);

    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
    const world = async (paths: string[]): Promise<{ id: string; name: string; endpointIds: string[] }> => {
      const w = await prisma.world.create({ data: { organizationId: organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
      const endpointIds: string[] = [];
      for (const path of paths) {
        const e = await prisma.webhookEndpoint.create({
          data: { worldId: w.id, url: `${receiver.origin}/${path}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
        });
        endpointIds.push(e.id);
      }
      return { id: w.id, name: `${organization.slug}/${w.slug}`, endpointIds };
    };
    const healthy = await world(Array.from({ length: HEALTHY }, (_, i) => `ok/${i}`));
    const schedBase = `${bullPrefix(keyPrefix)}:${QUEUE_NAMES.deliveries}:sched:`;
    const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

    /** The backlog now queued, if any: its world and endpoint. */
    let backlog: { worldId: string; endpointId: string } | null = null;
    /** Queues BACKLOG deliveries for a new slow endpoint, through ingest, and waits until they are parked. */
    const queueBacklog = async (): Promise<void> => {
      const slow = await world(["slow/0"]);
      const endpointId = slow.endpointIds[0]!;
      backlog = { worldId: slow.id, endpointId };
      const parkedKey = `${schedBase}ep:${endpointId}:parked`;
      const started = Date.now();
      const slow0 = (await receiverStats(receiver.origin)).slow;
      await postBurst(ingest.url, INGEST_TOKEN, slow.name, BACKLOG, 1000, 4);
      for (;;) {
        const parked = await redis.zcard(parkedKey);
        const done = (await receiverStats(receiver.origin)).slow - slow0;
        if (parked + done >= BACKLOG - 20) break;
        await sleep(200);
      }
      log(`  backlog of ${BACKLOG} queued in ${((Date.now() - started) / 1000).toFixed(1)} s (${await redis.zcard(parkedKey)} parked)`);
    };
    /**
     * Takes the backlog away: its parked set first (so no release hands a slot to a job about to be
     * deleted), then every waiting and delayed job (at this point only the backlog's: the healthy
     * ones have all been delivered), then, once the jobs already running have ended, its world
     * (ON DELETE CASCADE takes its events, deliveries and attempts).
     */
    const removeBacklog = async (): Promise<void> => {
      if (backlog === null) return;
      const { worldId, endpointId } = backlog;
      const started = Date.now();
      await redis.multi().del(`${schedBase}ep:${endpointId}:parked`).zrem(`${schedBase}backlogged`, endpointId).exec();
      await queue.drain(true);
      for (;;) {
        const [active, waiting, delayed, stats] = await Promise.all([queue.getActiveCount(), queue.getWaitingCount(), queue.getDelayedCount(), receiverStats(receiver.origin)]);
        if (active + waiting + delayed === 0 && stats.slowInFlight === 0) break;
        await sleep(200);
      }
      const drained = Date.now();
      await prisma.world.delete({ where: { id: worldId } });
      backlog = null;
      log(`  backlog removed in ${((Date.now() - started) / 1000).toFixed(1)} s (jobs ${((drained - started) / 1000).toFixed(1)} s, rows ${((Date.now() - drained) / 1000).toFixed(1)} s)`);
    };

    const events = Math.ceil(DELIVERIES / HEALTHY);
    const expected = events * HEALTHY;
    /** CPU seconds so far of each part (PostgreSQL's by process, where `/proc` can be read). */
    const cpuNow = async (): Promise<{ parts: Map<string, number>; postgres: Map<number, number> }> => {
      const own = process.cpuUsage();
      const parts = new Map<string, number>([
        ["worker", await metricValue(worker, "process_cpu_seconds_total")],
        ["ingest", await metricValue(ingest, "process_cpu_seconds_total")],
        ["redis", await redisCpuSeconds(redis)],
        ["receiver", (await receiverStats(receiver.origin)).cpuMs / 1000],
        ["client", (own.user + own.system) / 1e6],
      ]);
      return { parts, postgres: postgresCpuSeconds() };
    };
    const cpuBetween = (before: Awaited<ReturnType<typeof cpuNow>>, after: Awaited<ReturnType<typeof cpuNow>>): Map<string, number> => {
      const used = new Map<string, number>();
      for (const [part, seconds] of after.parts) used.set(part, seconds - before.parts.get(part)!);
      if (after.postgres.size > 0) used.set("postgres", postgresCpuBetween(before.postgres, after.postgres));
      return used;
    };
    /** One burst of `expected` healthy deliveries: its throughput, drain p99, Redis commands, slow deliveries and CPU. */
    const burst = async (): Promise<{ rate: number; p99: number; commands: ReturnType<typeof commandDelta>; slow: number; cpu: Map<string, number> }> => {
      // Each burst starts from a checkpointed database (queuing the backlog wrote 100,000 deliveries
      // just before, and removing it deleted as many: their pages' flush would otherwise land in
      // the burst) and from fresh statistics (a PostgreSQL with autovacuum on, as deployed,
      // analyzes a partition that has just grown by 100,000 rows; this machine's has it off).
      await prisma.$executeRawUnsafe("VACUUM ANALYZE webhook_events, webhook_deliveries, delivery_attempts, endpoint_stats");
      await prisma.$executeRawUnsafe("CHECKPOINT");
      await resetReceiver(receiver.origin);
      const calls0 = await commandCalls(redis);
      const cpu0 = await cpuNow();
      const start = Date.now();
      await postBurst(ingest.url, INGEST_TOKEN, healthy.name, events, 100, 4);
      const s = await receiverReached(receiver.origin, expected);
      const cpu = cpuBetween(cpu0, await cpuNow());
      const commands = commandDelta(calls0, await commandCalls(redis));
      return { rate: expected / ((s.lastAt - start) / 1000), p99: s.p99, commands, slow: s.slow, cpu };
    };

    /**
     * Waits until the burst's jobs are finished (none waiting, none active but the backlog's, which
     * holds at most its window in flight and as many promoted), then a second more: the first
     * open-loop round otherwise starts while the worker still logs and completes the burst's last
     * jobs, and read two to five times the p99 of the next.
     */
    const settle = async (): Promise<void> => {
      for (;;) {
        const [active, waiting] = await Promise.all([queue.getActiveCount(), queue.getWaitingCount()]);
        if (waiting === 0 && active <= (backlog === null ? 0 : 20)) break;
        await sleep(100);
      }
      await sleep(1000);
    };

    log(
      `backlog benchmark: ${HEALTHY} healthy endpoints, conditions in the order ${ORDER} (A: no backlog, B: ${BACKLOG} queued on one endpoint answering in 1 s, window 10); ` +
        `each unit ${BURSTS} burst(s) of ${expected} healthy deliveries, then ${LAG_ROUNDS} x ${LAG_SECONDS} s open loop at half the first burst's throughput`,
    );
    await burst(); // warm-up: JIT, pools, caches, the tables' first pages

    let lagEventsPerSecond = 0;
    const units: Unit[] = [];
    for (const condition of ORDER as Iterable<Condition>) {
      if (condition === "B" && backlog === null) await queueBacklog();
      if (condition === "A") await removeBacklog();
      const unit: Unit = { condition, rates: [], burstP99s: [], commands: 0, commandsByName: new Map(), delivered: 0, slowDelivered: 0, cpu: new Map(), lagP50s: [], lagP99s: [] };
      for (let i = 0; i < BURSTS; i += 1) {
        const b = await burst();
        unit.rates.push(b.rate);
        unit.burstP99s.push(b.p99);
        unit.commands += b.commands.total;
        for (const [name, n] of b.commands.all) unit.commandsByName.set(name, (unit.commandsByName.get(name) ?? 0) + n);
        unit.delivered += expected + b.slow;
        unit.slowDelivered += b.slow;
        for (const [part, seconds] of b.cpu) unit.cpu.set(part, (unit.cpu.get(part) ?? 0) + seconds);
      }
      if (lagEventsPerSecond === 0) lagEventsPerSecond = (medianOf(unit.rates) * 0.5) / HEALTHY;
      await settle();
      for (let round = 0; round < LAG_ROUNDS; round += 1) {
        await resetReceiver(receiver.origin);
        const { posted } = await openLoop({ ingestUrl: ingest.url, token: INGEST_TOKEN, world: healthy.name, eventsPerSecond: lagEventsPerSecond, seconds: LAG_SECONDS });
        const lag = await receiverReached(receiver.origin, posted * HEALTHY);
        unit.lagP50s.push(lag.p50);
        unit.lagP99s.push(lag.p99);
      }
      units.push(unit);
      const fmt0 = (xs: number[]): string => xs.map((x) => x.toFixed(0)).join(", ");
      const unitCpuMs = ([...unit.cpu.values()].reduce((a, b) => a + b, 0) * 1000) / (unit.rates.length * expected);
      log(`  ${condition}: healthy ${fmt0(unit.rates)} deliveries/s (CPU ${unitCpuMs.toFixed(3)} ms per delivery), open-loop p99 ${fmt0(unit.lagP99s)} ms`);
    }

    const quiet = condense(units.filter((u) => u.condition === "A"), expected);
    const loaded = condense(units.filter((u) => u.condition === "B"), expected);
    const fmt = (n: number, d = 0): string => n.toFixed(d);
    const lagRate = lagEventsPerSecond * HEALTHY;
    const line = (m: Condensed): string =>
      `healthy ${fmt(m.rate)} deliveries/s (bursts ${m.rates.map((r) => fmt(r)).join(", ")}; burst p99 ${fmt(m.burstP99)} ms), open loop at ${fmt(lagRate)}/s: ` +
      `median round lag p50 ${fmt(m.lagP50)} ms, p99 ${fmt(m.lagP99)} ms (p99 per round ${m.lagP99s.map((x) => fmt(x)).join(", ")}); ${fmt(m.commandsPerMessage, 2)} Redis commands per delivered message`;
    log("");
    log(`no backlog:   ${line(quiet)}`);
    log(`with backlog: ${line(loaded)} (${loaded.slowDelivered} slow deliveries during the bursts)`);
    if (ingestRetries.count > 0) log(`  (ingest answered 503 ${ingestRetries.count} times under the machine's load; retried)`);
    log(`  per message, no backlog: ${quiet.topCommands}`);
    log(`  per message, with backlog: ${loaded.topCommands}`);
    const cpuLine = (m: Condensed): string => `${[...m.cpuMsPerDelivery].map(([part, ms]) => `${part} ${fmt(ms, 3)}`).join(", ")}; in all ${fmt(m.cpuMsTotal, 3)}`;
    log(`  CPU ms per healthy delivery during the bursts, no backlog: ${cpuLine(quiet)}`);
    log(`  CPU ms per healthy delivery during the bursts, with backlog: ${cpuLine(loaded)}`);
    log(`  healthy throughput with backlog = ${fmt((loaded.rate / quiet.rate) * 100, 1)}% of no backlog (goal >= 95%)`);
    log(`  healthy p99 lag with backlog = ${fmt(loaded.lagP99 / Math.max(1, quiet.lagP99), 2)}x no backlog (goal <= 1.2x)`);
    log(`  Redis commands per delivered message with backlog = ${fmt(loaded.commandsPerMessage / quiet.commandsPerMessage, 2)}x no backlog (goal <= 1.5x)`);
    log(`  CPU per healthy delivery with backlog = ${fmt((loaded.cpuMsTotal / Math.max(1e-9, quiet.cpuMsTotal)) * 100, 1)}% of no backlog (what the machine's noise moves least)`);
  } finally {
    await queue.close();
    queueConnection.disconnect();
    for (const p of processes) await p.kill9();
    receiver.stop();
    redis.disconnect();
    await redisServer.stop();
    await prisma.$disconnect();
  }
}

await main();
