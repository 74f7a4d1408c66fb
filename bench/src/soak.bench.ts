/**
 * `pnpm bench soak`: a steady load for half an hour, on a PostgreSQL with production's defaults.
 *
 * The machine's PostgreSQL is tuned for CI (autovacuum off): under a steady load the delivery
 * log's status updates pile up dead tuples and new partitions are never analyzed, and throughput
 * falls within minutes. So this benchmark starts its own PostgreSQL 15 with the defaults
 * (autovacuum on; packages/testing startPostgres), migrated, and its own Redis (so Redis's memory
 * is this run's alone), with event-ingest, delivery-worker and a receiver as processes.
 *
 * First a burst measures the pipeline's maximum here (deliveries/s; after a first burst that warms
 * the processes up); then an open loop offers half of it for BENCH_SOAK_MINUTES (30),
 * BENCH_SOAK_ENDPOINTS (20) endpoints per event. Each minute it
 * records the deliveries' p99 lag (event timestamp to arrival), each service's RSS and Redis's
 * used memory. Goals:
 * - p99 lag under 1 s in every minute;
 * - RSS of each service and Redis's memory flat after warm-up (the first BENCH_SOAK_WARMUP_MINUTES,
 *   5): a least-squares slope under 1 MB per minute;
 * - no error in any service's log.
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { createPrismaClient } from "@vw/db";
import { RUNTIME_NODE_FLAGS, spawnService, startPostgres, startRedis, type ServiceProcess } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import { openLoop, postBurst, receiverReached, receiverStats, resetReceiver, startReceiver } from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { migrateDatabase, serviceDir } from "./lib/services.js";

const MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 30);
const WARMUP_MINUTES = Number(process.env.BENCH_SOAK_WARMUP_MINUTES ?? Math.min(5, Math.floor(MINUTES / 3)));
const ENDPOINTS = Number(process.env.BENCH_SOAK_ENDPOINTS ?? 20);
/** Events of the burst that measures the maximum (times ENDPOINTS deliveries). */
const BURST_EVENTS = Number(process.env.BENCH_SOAK_BURST_EVENTS ?? 1000);
const MB = 1024 * 1024;
/**
 * Server settings away from PostgreSQL's defaults, as `name=value,...` (none by default): to soak
 * on a server sized as packages/db/README.md advises for the rate, `shared_buffers=2GB,max_wal_size=8GB`.
 */
const PG_SETTINGS = Object.fromEntries(
  (process.env.BENCH_SOAK_PG_SETTINGS ?? "")
    .split(",")
    .filter((pair) => pair.includes("="))
    .map((pair) => pair.split("=", 2).map((part) => part.trim()) as [string, string]),
);

/** Resident set size of a process, in bytes (Linux `/proc`). */
function rssOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Least-squares slope of `values` (one per minute), in units per minute. */
function slopePerMinute(values: readonly number[]): number {
  const n = values.length;
  if (n < 2) return 0;
  const meanX = (n - 1) / 2;
  const meanY = values.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  values.forEach((y, x) => {
    num += (x - meanX) * (y - meanY);
    den += (x - meanX) ** 2;
  });
  return num / den;
}

/** Lines of a service's JSON log at level error or worse. */
function errorLines(service: ServiceProcess): string[] {
  return service
    .stdout()
    .split("\n")
    .filter((line) => {
      try {
        return (JSON.parse(line) as { level?: number }).level! >= 50;
      } catch {
        return line.trim() !== "";
      }
    });
}

async function main(): Promise<void> {
  const goals = new GoalTally();
  const postgres = await startPostgres({ settings: PG_SETTINGS });
  if (Object.keys(PG_SETTINGS).length > 0) console.log(`PostgreSQL settings away from the defaults: ${JSON.stringify(PG_SETTINGS)}`);
  const redis = await startRedis();
  const receiver = await startReceiver();
  const processes: ServiceProcess[] = [];
  const databaseUrl = await postgres.createDatabase("soak");
  await migrateDatabase(databaseUrl);
  const prisma = createPrismaClient(databaseUrl, { max: 2 });
  const stats = new Redis(redis.url);
  try {
    const secretsKey = generateSecretBoxKey();
    const box = createSecretBox(secretsKey);
    const ingestToken = randomBytes(24).toString("base64url");
    const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, REDIS_KEY_PREFIX: "soak", SECRETS_ENCRYPTION_KEY: secretsKey, LOG_LEVEL: "warn" };
    const ingest = await spawnService(serviceDir("event-ingest"), { ...env, INGEST_TOKEN: ingestToken }, { nodeArgs: [...RUNTIME_NODE_FLAGS], readyTimeoutMs: 60_000 });
    processes.push(ingest);
    const worker = await spawnService(serviceDir("delivery-worker"), { ...env, ENDPOINT_URL_POLICY: "any" }, { nodeArgs: [...RUNTIME_NODE_FLAGS], readyTimeoutMs: 60_000 });
    processes.push(worker);

    const organization = await prisma.organization.create({ data: { slug: `soak-${randomBytes(4).toString("hex")}`, name: "Soak" } });
    const world = await prisma.world.create({ data: { organizationId: organization.id, slug: "soak", name: "Soak", adminEmails: [] } });
    for (let i = 0; i < ENDPOINTS; i += 1) {
      await prisma.webhookEndpoint.create({
        data: { worldId: world.id, url: `${receiver.origin}/ok/${i}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
      });
    }
    const worldRef = `${organization.slug}/${world.slug}`;

    // The pipeline's maximum here: a burst, as fast as ingest takes it, after one alike that warms
    // the processes up (a cold first burst runs at a fraction of the rate, and would set the load).
    await resetReceiver(receiver.origin);
    await postBurst(ingest.url, ingestToken, worldRef, BURST_EVENTS, 50, 4);
    await receiverReached(receiver.origin, BURST_EVENTS * ENDPOINTS);
    await resetReceiver(receiver.origin);
    const burstStart = Date.now();
    await postBurst(ingest.url, ingestToken, worldRef, BURST_EVENTS, 50, 4);
    await receiverReached(receiver.origin, BURST_EVENTS * ENDPOINTS);
    const maximum = (BURST_EVENTS * ENDPOINTS) / ((Date.now() - burstStart) / 1000);
    // BENCH_SOAK_RATE sets the load instead (deliveries/s), to compare runs at one rate.
    const offered = process.env.BENCH_SOAK_RATE ? Number(process.env.BENCH_SOAK_RATE) : maximum / 2;
    console.log(
      `burst maximum ${Math.round(maximum)} deliveries/s; soaking at ${process.env.BENCH_SOAK_RATE ? "BENCH_SOAK_RATE" : "half of it"}, ${Math.round(offered)} deliveries/s, for ${MINUTES} min (${WARMUP_MINUTES} of warm-up)`,
    );

    const minutes: { p99: number; delivered: number; rss: number[]; redis: number }[] = [];
    for (let minute = 1; minute <= MINUTES; minute += 1) {
      await resetReceiver(receiver.origin);
      await openLoop({ ingestUrl: ingest.url, token: ingestToken, world: worldRef, eventsPerSecond: offered / ENDPOINTS, seconds: 60 });
      const s = await receiverStats(receiver.origin);
      const info = await stats.info("memory");
      const used = Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0);
      const row = { p99: s.p99, delivered: s.count, rss: processes.map((p) => rssOf(p.child.pid)), redis: used };
      minutes.push(row);
      // The queue table's dead rows and vacuum passes, to read a slow minute against.
      const [queue] = await prisma.$queryRaw<{ dead: bigint; vacuums: bigint }[]>`
        SELECT n_dead_tup AS dead, autovacuum_count AS vacuums FROM pg_stat_user_tables WHERE relname = 'delivery_states'`;
      console.log(
        `minute ${minute}: ${Math.round(s.count / 60)} deliveries/s, p99 lag ${s.p99} ms (max ${s.max} ms, over 1 s in ${s.lateSeconds} s), RSS ingest ${(row.rss[0]! / MB).toFixed(1)} MB, worker ${(row.rss[1]! / MB).toFixed(1)} MB, Redis ${(used / MB).toFixed(1)} MB, ` +
          `delivery_states ${queue?.dead ?? "?"} dead rows (${queue?.vacuums ?? "?"} autovacuums so far)`,
      );
    }

    const worstP99 = Math.max(...minutes.map((m) => m.p99));
    console.log(`p99 lag under 1 s in every minute: worst minute ${worstP99} ms ${goals.judge(worstP99 < 1000) ? "" : "NOT MET "}(goal < 1000 ms)`);
    const settled = minutes.slice(WARMUP_MINUTES);
    for (const [i, name] of ["event-ingest", "delivery-worker"].entries()) {
      const slope = slopePerMinute(settled.map((m) => m.rss[i]!)) / MB;
      console.log(`${name} RSS after warm-up: ${slope >= 0 ? "+" : ""}${slope.toFixed(3)} MB/min ${goals.judge(slope < 1) ? "" : "NOT MET "}(goal < 1 MB/min)`);
    }
    const redisSlope = slopePerMinute(settled.map((m) => m.redis)) / MB;
    console.log(`Redis memory after warm-up: ${redisSlope >= 0 ? "+" : ""}${redisSlope.toFixed(3)} MB/min ${goals.judge(redisSlope < 1) ? "" : "NOT MET "}(goal < 1 MB/min)`);
    const errors = processes.flatMap((p) => errorLines(p).map((line) => `${p.url}: ${line.slice(0, 300)}`));
    for (const line of errors.slice(0, 5)) console.log(`  ${line}`);
    console.log(`error lines in the services' logs: ${errors.length} ${goals.judge(errors.length === 0) ? "" : "NOT MET "}(goal 0)`);
  } finally {
    await Promise.all(processes.map((p) => p.stop()));
    receiver.stop();
    stats.disconnect();
    await prisma.$disconnect();
    await redis.stop();
    await postgres.stop();
  }
  console.log(goals.summary());
}

await main();
