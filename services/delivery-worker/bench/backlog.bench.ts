/**
 * `pnpm bench backlog`: what one endpoint's backlog costs everybody else. event-ingest and one
 * delivery-worker process (concurrency 100, endpoint window 10) against a private Redis (so
 * `INFO commandstats` counts this run only) and the receiver process. Two identical measurements
 * of 19 healthy endpoints:
 *   1. with no backlog;
 *   2. with a 20th endpoint (its own world) holding BENCH_BACKLOG (100,000) queued deliveries that
 *      it answers in one second each, at most 10 at once.
 * Each measurement: BENCH_BURSTS (3) bursts of BENCH_DELIVERIES healthy deliveries (the median
 * burst's throughput is compared: one burst of a few seconds moved by 15% or more between runs of
 * the same code on this shared machine; and Redis commands per delivered message over all of them,
 * counting the slow endpoint's deliveries too), then BENCH_LAG_ROUNDS (5)
 * open-loop phases at half the first run's throughput for BENCH_LAG_SECONDS (10) each (p50/p99 lag
 * from intake to receiver; the median round's figures are compared, so that one disturbance of
 * this shared machine does not decide the result).
 * Expects DATABASE_URL (scripts/bench.mjs provides it); starts its own redis-server.
 */
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { createPrismaClient } from "@vw/db";
import { QUEUE_NAMES, bullPrefix } from "@vw/queues";
import { spawnService, type ServiceProcess } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import { commandCalls, commandDelta, ingestRetries, openLoop, postBurst, receiverReached, receiverStats, resetReceiver, startPrivateRedis, startReceiver } from "./bench-kit.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..");
const HEALTHY = 19;
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 100_000);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 19_000);
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 10);
const LAG_ROUNDS = Number(process.env.BENCH_LAG_ROUNDS ?? 5);
const BURSTS = Math.max(1, Number(process.env.BENCH_BURSTS ?? 3));
const INGEST_TOKEN = "bench-ingest-token-0123456789";
const keyPrefix = `vwbench-${randomBytes(4).toString("hex")}`;
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);
const log = (msg: string): void => console.log(msg);

interface Measurement {
  /** The median burst's throughput. */
  rate: number;
  /** Each burst's throughput. */
  rates: number[];
  /** The median burst's p99 lag (a burst's lag is its drain time). */
  burstP99: number;
  commandsPerMessage: number;
  /** The most called commands, per delivered message. */
  topCommands: string;
  slowDelivered: number;
  lagP50: number;
  lagP99: number;
  /** p99 of each open-loop round. */
  lagP99s: number[];
}

const medianOf = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL!;
  const redisServer = await startPrivateRedis();
  const redis = new Redis(redisServer.url);
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startReceiver();
  const processes: ServiceProcess[] = [];
  try {
    const env = { DATABASE_URL: databaseUrl, REDIS_URL: redisServer.url, REDIS_KEY_PREFIX: keyPrefix, LOG_LEVEL: "warn", SECRETS_ENCRYPTION_KEY: secretsKey };
    const ingest = await spawnService(join(root, "services", "event-ingest"), { ...env, INGEST_TOKEN, MAX_EVENTS_PER_REQUEST: "1000" });
    processes.push(ingest);
    processes.push(
      await spawnService(join(root, "services", "delivery-worker"), {
        ...env,
        ENDPOINT_URL_POLICY: "any",
        DELIVERY_CONCURRENCY: "100",
        DELIVERY_ENDPOINT_CONCURRENCY: "10",
      }),
    );

    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
    const world = async (paths: string[]): Promise<{ name: string; endpointIds: string[] }> => {
      const w = await prisma.world.create({ data: { organizationId: organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
      const endpointIds: string[] = [];
      for (const path of paths) {
        const e = await prisma.webhookEndpoint.create({
          data: { worldId: w.id, url: `${receiver.origin}/${path}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
        });
        endpointIds.push(e.id);
      }
      return { name: `${organization.slug}/${w.slug}`, endpointIds };
    };
    const healthy = await world(Array.from({ length: HEALTHY }, (_, i) => `ok/${i}`));
    const slow = await world(["slow/0"]);
    const parkedKey = `${bullPrefix(keyPrefix)}:${QUEUE_NAMES.deliveries}:sched:ep:${slow.endpointIds[0]}:parked`;

    const events = Math.ceil(DELIVERIES / HEALTHY);
    const expected = events * HEALTHY;
    const measure = async (lagEventsPerSecond: number | null): Promise<Measurement> => {
      // Both measurements start from a checkpointed database: queuing the backlog wrote 100,000
      // deliveries just before the second, and the flush of their pages would otherwise land in it.
      // And from fresh statistics: a PostgreSQL with autovacuum on (as deployed) analyzes a
      // partition that has just grown by 100,000 rows; this machine's has it off.
      const rates: number[] = [];
      const burstP99s: number[] = [];
      let commandsTotal = 0;
      const commandsByName = new Map<string, number>();
      let slowDelivered = 0;
      for (let burst = 0; burst < BURSTS; burst += 1) {
        await prisma.$executeRawUnsafe("VACUUM ANALYZE webhook_events, webhook_deliveries, delivery_attempts, endpoint_stats");
        await prisma.$executeRawUnsafe("CHECKPOINT");
        await resetReceiver(receiver.origin);
        const calls0 = await commandCalls(redis);
        const start = Date.now();
        await postBurst(ingest.url, INGEST_TOKEN, healthy.name, events, 100, 4);
        const s = await receiverReached(receiver.origin, expected);
        const commands = commandDelta(calls0, await commandCalls(redis));
        rates.push(expected / ((s.lastAt - start) / 1000));
        burstP99s.push(s.p99);
        commandsTotal += commands.total;
        for (const [name, n] of commands.all) commandsByName.set(name, (commandsByName.get(name) ?? 0) + n);
        slowDelivered += s.slow;
      }
      const delivered = expected * BURSTS + slowDelivered;
      const rate = medianOf(rates);
      const eventsPerSecond = lagEventsPerSecond ?? (rate * 0.5) / HEALTHY;
      const p50s: number[] = [];
      const p99s: number[] = [];
      for (let round = 0; round < LAG_ROUNDS; round += 1) {
        await resetReceiver(receiver.origin);
        const { posted } = await openLoop({ ingestUrl: ingest.url, token: INGEST_TOKEN, world: healthy.name, eventsPerSecond, seconds: LAG_SECONDS });
        const lag = await receiverReached(receiver.origin, posted * HEALTHY);
        p50s.push(lag.p50);
        p99s.push(lag.p99);
      }
      return {
        rate,
        rates,
        burstP99: medianOf(burstP99s),
        commandsPerMessage: commandsTotal / delivered,
        topCommands: [...commandsByName]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 8)
          .map(([name, n]) => `${name} ${(n / delivered).toFixed(1)}`)
          .join(", "),
        slowDelivered,
        lagP50: medianOf(p50s),
        lagP99: medianOf(p99s),
        lagP99s: p99s,
      };
    };

    log(`backlog benchmark: ${HEALTHY} healthy endpoints, ${BURSTS} bursts of ${expected} healthy deliveries (median compared), then ${LAG_ROUNDS} x ${LAG_SECONDS} s open loop at half the no-backlog throughput; backlog ${BACKLOG} on one endpoint answering in 1 s (window 10)`);
    await postBurst(ingest.url, INGEST_TOKEN, healthy.name, 200, 100, 4); // warm-up
    await receiverReached(receiver.origin, 200 * HEALTHY);

    const quiet = await measure(null);
    const lagRate = (quiet.rate * 0.5) / HEALTHY;

    const backlogStart = Date.now();
    await postBurst(ingest.url, INGEST_TOKEN, slow.name, BACKLOG, 1000, 4);
    for (;;) {
      const parked = await redis.zcard(parkedKey);
      const { slow: done } = await receiverStats(receiver.origin);
      if (parked + done >= BACKLOG - 20) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    log(`backlog of ${BACKLOG} queued in ${((Date.now() - backlogStart) / 1000).toFixed(1)} s (${await redis.zcard(parkedKey)} parked)`);
    const loaded = await measure(lagRate);

    const fmt = (n: number, d = 0): string => n.toFixed(d);
    log("");
    const each = (m: Measurement): string => (m.rates.length > 1 ? ` (bursts ${m.rates.map((r) => fmt(r)).join(", ")})` : "");
    log(`no backlog:   healthy ${fmt(quiet.rate)} deliveries/s${each(quiet)} (burst p99 ${fmt(quiet.burstP99)} ms), open loop at ${fmt(lagRate * HEALTHY)}/s: median round lag p50 ${fmt(quiet.lagP50)} ms, p99 ${fmt(quiet.lagP99)} ms (p99 per round ${quiet.lagP99s.map((x) => fmt(x)).join(", ")}); ${fmt(quiet.commandsPerMessage, 2)} Redis commands per delivered message`);
    log(`with backlog: healthy ${fmt(loaded.rate)} deliveries/s${each(loaded)} (burst p99 ${fmt(loaded.burstP99)} ms), open loop at ${fmt(lagRate * HEALTHY)}/s: median round lag p50 ${fmt(loaded.lagP50)} ms, p99 ${fmt(loaded.lagP99)} ms (p99 per round ${loaded.lagP99s.map((x) => fmt(x)).join(", ")}); ${fmt(loaded.commandsPerMessage, 2)} Redis commands per delivered message (${loaded.slowDelivered} slow deliveries during the bursts)`);
    if (ingestRetries.count > 0) log(`  (ingest answered 503 ${ingestRetries.count} times under the machine's load; retried)`);
    log(`  per message, no backlog: ${quiet.topCommands}`);
    log(`  per message, with backlog: ${loaded.topCommands}`);
    log(`  healthy throughput with backlog = ${fmt((loaded.rate / quiet.rate) * 100, 1)}% of no backlog (goal >= 95%)`);
    log(`  healthy p99 lag with backlog = ${fmt(loaded.lagP99 / Math.max(1, quiet.lagP99), 2)}x no backlog (goal <= 1.2x)`);
    log(`  Redis commands per delivered message with backlog = ${fmt(loaded.commandsPerMessage / quiet.commandsPerMessage, 2)}x no backlog (goal <= 1.5x)`);
  } finally {
    for (const p of processes) await p.kill9();
    receiver.stop();
    redis.disconnect();
    await redisServer.stop();
    await prisma.$disconnect();
  }
}

await main();
