/**
 * `BENCH_REDIS=cluster pnpm bench delivery`: the delivery benchmark's end-to-end run (events in
 * batches through event-ingest, fanned out to BENCH_ENDPOINTS endpoints (200 here), one delivery-worker at
 * BENCH_CONCURRENCY, every attempt logged) on two stacks side by side at the same moment: one on a
 * standalone redis-server, one on a Redis Cluster of 3 primaries (BENCH_CLUSTER_REPLICAS replicas
 * each, 0 by default), both started here from the machine's `redis-server` with the same flags
 * (@vw/testing). Each stack has its own database (DATABASE_URL and DATABASE_URL_CLUSTER), receiver
 * process and key prefix; the services get the topology as an operator gives it (REDIS_URL, or
 * REDIS_CLUSTER_NODES), and QUEUE_SHARDS when BENCH_QUEUE_SHARDS is set.
 *
 * Side by side, as the backlog benchmark does: a slow spell of the shared machine slows both alike.
 * Both stacks share its cores, so each delivers about half of what one would alone, and the ratio
 * of their throughputs over the same window is the ratio of what a delivery costs them. On two
 * cores a Cluster cannot show what its extra Redis cores add; this measures what it costs.
 *
 * Per unit (a warm-up, then BENCH_ROUNDS): a burst of BENCH_DELIVERIES deliveries posted to both at
 * once, each stack's throughput over the window until the first has all of its burst, then, once
 * both have logged every delivery: Redis commands per delivery (`INFO commandstats` summed over the
 * primaries, before and after, the benchmark's own INFO and PING left out), each primary's share of
 * them, Redis CPU per delivery (`used_cpu_user` + `used_cpu_sys`, summed), the worker's, ingest's,
 * the receiver's and the stack's PostgreSQL backends' CPU per delivery, and the database's commits,
 * rows and bytes per delivery (`pg_stat_database`, `pg_database_size`: that database alone).
 * Goals: cluster throughput >= 90% of standalone (geometric mean of the units' paired ratios),
 * Redis commands per delivery <= 1.1x standalone, the busiest primary serving <= 45% of the
 * Cluster's delivery commands.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { createPrismaClient, type PrismaClient } from "@vw/db";
import { spawnService, startRedis, startRedisCluster, type RedisNodeAddress, type ServiceProcess } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import {
  backendPids,
  commandCalls,
  databaseCounters,
  ingestRetries,
  metricValue,
  postBurst,
  postgresCpuSeconds,
  postgresBackendsBetween,
  receiverStats,
  redisCpuSeconds,
  resetReceiver,
  startReceiver,
  type DatabaseCounters,
} from "./bench-kit.js";
import { GoalTally } from "./goals.js";
import { addCounts, nodeShares, platformCommands, total, type CommandReading } from "./node-counters.js";
import { serviceDir } from "./services.js";

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 100);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 20_000);
/**
 * 200 endpoints by default, not the standalone benchmark's 20: which primary an endpoint's shard
 * lives on is a draw, and with 20 endpoints the busiest primary's share is mostly the luck of 20
 * draws (its expected value is about 45-50% even when the shards are laid out as evenly as 16
 * shards over 3 primaries allow, 37.5%). With 200 it measures the layout. Each request still
 * carries 2,000 deliveries (10 events).
 */
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 200);
const BATCH = Number(process.env.BENCH_BATCH ?? Math.max(1, Math.round(2000 / ENDPOINTS)));
const POSTERS = Number(process.env.BENCH_POSTERS ?? 4);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const PRIMARIES = 3;
const REPLICAS = Math.max(0, Number(process.env.BENCH_CLUSTER_REPLICAS ?? 0));
const QUEUE_SHARDS = process.env.BENCH_QUEUE_SHARDS;
/** A stack that delivers nothing for this long has failed (its worker's log says why: CROSSSLOT, say). */
const STALL_MS = Number(process.env.BENCH_STALL_MS ?? 60_000);
const INGEST_TOKEN = "bench-ingest-token-3d7a1f9c5e2b8046";
const CPU_PARTS = ["worker", "ingest", "postgres", "redis", "receiver"] as const;

const log = (msg: string): void => console.log(msg);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);

type Topology = "standalone" | "cluster";

/** One stack: its services, stores, the primaries it counts, and its endpoints' world. */
interface Stack {
  topology: Topology;
  prisma: PrismaClient;
  receiver: { origin: string; stop: () => void };
  ingest: ServiceProcess;
  worker: ServiceProcess;
  /** One connection per primary, for INFO (the standalone Redis is its only primary). */
  primaries: { address: string; redis: Redis }[];
  world: string;
  /** Why it stopped delivering (null while it runs): a Cluster before slot-safe keys meets CROSSSLOT. */
  failed: string | null;
  /** Stops its processes and its Redis (private: its keys go with it). */
  stop: () => Promise<void>;
}

/** What one stack did in one unit. */
interface Share {
  rate: number;
  /** Platform commands per primary, per command. */
  commandsByPrimary: Map<string, number>[];
  cpuSeconds: Map<(typeof CPU_PARTS)[number], number>;
  database: DatabaseCounters;
  delivered: number;
}

async function startStack(topology: Topology, databaseUrl: string): Promise<Stack> {
  const stops: (() => Promise<void> | void)[] = [];
  const stopAll = async (): Promise<void> => {
    for (const stop of stops.reverse()) await stop();
  };
  try {
    let redisEnv: Record<string, string>;
    let addresses: RedisNodeAddress[];
    if (topology === "standalone") {
      const server = await startRedis();
      stops.push(() => server.stop());
      redisEnv = { REDIS_URL: server.url };
      addresses = [{ host: "127.0.0.1", port: server.port }];
    } else {
      const cluster = await startRedisCluster({ primaries: PRIMARIES, replicasPerPrimary: REPLICAS });
      stops.push(() => cluster.stop());
      redisEnv = { REDIS_CLUSTER_NODES: cluster.seeds };
      addresses = await cluster.primaries();
    }
    const primaries = addresses.map((a) => ({ address: `${a.host}:${a.port}`, redis: new Redis({ host: a.host, port: a.port }) }));
    stops.push(() => primaries.forEach((p) => p.redis.disconnect()));
    const prisma = createPrismaClient(databaseUrl);
    stops.push(() => prisma.$disconnect());
    const receiver = await startReceiver();
    stops.push(() => receiver.stop());
    const keyPrefix = `vwbench-${randomBytes(4).toString("hex")}`;
    const env = {
      DATABASE_URL: databaseUrl,
      // The one topology of this stack: the environment's (REDIS_URL from scripts/bench.mjs) blanked.
      REDIS_URL: "",
      REDIS_SENTINELS: "",
      REDIS_CLUSTER_NODES: "",
      ...redisEnv,
      REDIS_KEY_PREFIX: keyPrefix,
      LOG_LEVEL: "warn",
      SECRETS_ENCRYPTION_KEY: secretsKey,
      ...(QUEUE_SHARDS ? { QUEUE_SHARDS } : {}),
    };
    const ingest = await spawnService(serviceDir("event-ingest"), { ...env, INGEST_TOKEN });
    stops.push(() => ingest.kill9());
    const worker = await spawnService(serviceDir("delivery-worker"), { ...env, ENDPOINT_URL_POLICY: "any", DELIVERY_CONCURRENCY: String(CONCURRENCY) });
    stops.push(() => worker.kill9());
    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
    const world = await prisma.world.create({ data: { organizationId: organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
    for (let i = 0; i < ENDPOINTS; i += 1) {
      await prisma.webhookEndpoint.create({
        data: { worldId: world.id, url: `${receiver.origin}/ok/${i}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
      });
    }
    return { topology, prisma, receiver, ingest, worker, primaries, world: `${organization.slug}/${world.slug}`, failed: null, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** CPU seconds so far of a stack's processes but PostgreSQL's (read from its backends, see {@link unit}). */
async function cpuNow(stack: Stack): Promise<Map<string, number>> {
  const redis = await Promise.all(stack.primaries.map((p) => redisCpuSeconds(p.redis)));
  return new Map([
    ["worker", await metricValue(stack.worker, "process_cpu_seconds_total")],
    ["ingest", await metricValue(stack.ingest, "process_cpu_seconds_total")],
    ["redis", redis.reduce((a, b) => a + b, 0)],
    ["receiver", (await receiverStats(stack.receiver.origin)).cpuMs / 1000],
  ]);
}

const readCommands = (stack: Stack): Promise<CommandReading[]> => Promise.all(stack.primaries.map((p) => commandCalls(p.redis)));
const deliveredCount = async (stack: Stack): Promise<number> => Number(await (await fetch(`${stack.receiver.origin}/_count`)).text());

/** Waits until the stack's database holds no pending delivery: every attempt of the burst logged. */
async function logged(stack: Stack): Promise<void> {
  const deadline = Date.now() + STALL_MS;
  for (;;) {
    const [row] = await stack.prisma.$queryRawUnsafe<{ n: bigint }[]>("SELECT count(*) AS n FROM delivery_states WHERE status = 'pending'");
    if (Number(row!.n) === 0) return;
    if (Date.now() > deadline) throw new Error(`${stack.topology}: ${row!.n} deliveries still pending ${STALL_MS} ms after the receiver had them all`);
    await sleep(100);
  }
}

/** The error lines of a long message (a service's exit with its whole stderr), each cut short. */
function briefly(message: string): string {
  const lines = message.split("\n").filter((line) => /error|CROSSSLOT|exited/i.test(line));
  return (lines.length > 0 ? lines : message.split("\n")).slice(0, 6).map((line) => line.trim().slice(0, 300)).join(" | ");
}

/** The end of a stack's logs, for its failure. */
const logTail = (stack: Stack): string =>
  `  its worker's log ends: ${stack.worker.stdout().slice(-1200)}${stack.worker.stderr().slice(-400)}\n  its ingest's log ends: ${stack.ingest.stdout().slice(-800)}`;

/**
 * One unit: the same burst posted to every stack still running at once (see the file comment).
 * A stack whose ingest refuses the burst or that delivers nothing for STALL_MS is marked failed
 * (with the end of its logs) and left out of what follows; the others' unit goes on.
 */
async function unit(all: readonly Stack[], events: number): Promise<Map<Stack, Share>> {
  const stacks = all.filter((s) => s.failed === null);
  const expected = events * ENDPOINTS;
  for (const s of stacks) await s.prisma.$executeRawUnsafe("VACUUM ANALYZE webhook_events, webhook_deliveries, delivery_attempts, endpoint_stats");
  await stacks[0]!.prisma.$executeRawUnsafe("CHECKPOINT");
  await Promise.all(stacks.map((s) => resetReceiver(s.receiver.origin)));
  const pg0 = postgresCpuSeconds();
  const cpu0 = await Promise.all(stacks.map(cpuNow));
  const calls0 = await Promise.all(stacks.map(readCommands));
  const db0 = await Promise.all(stacks.map((s) => databaseCounters(s.prisma)));
  const start = Date.now();
  const fail = (s: Stack, why: string): void => {
    if (s.failed === null) s.failed = `${why}\n${logTail(s)}`;
  };
  const posting = Promise.all(
    stacks.map((s) => postBurst(s.ingest.url, INGEST_TOKEN, s.world, events, BATCH, POSTERS).catch((err: unknown) => fail(s, `its ingest refused the burst: ${(err as Error).message}`))),
  );
  let window: { ms: number; counts: number[] } | null = null;
  let progress = { at: Date.now(), counts: stacks.map(() => 0) };
  for (;;) {
    const counts = await Promise.all(stacks.map(deliveredCount));
    const now = Date.now();
    const done = (i: number): boolean => counts[i]! >= expected || stacks[i]!.failed !== null;
    if (window === null && counts.some((c, i) => c >= expected && stacks[i]!.failed === null)) window = { ms: now - start, counts };
    if (stacks.every((_, i) => done(i))) break;
    if (counts.some((c, i) => c > progress.counts[i]!)) progress = { at: now, counts };
    else if (now - progress.at > STALL_MS) {
      stacks.forEach((s, i) => !done(i) && fail(s, `it delivered ${counts[i]} of ${expected} and then nothing for ${STALL_MS} ms`));
    }
    await sleep(100);
  }
  await posting;
  // A failed stack's processes would go on retrying beside the others: gone.
  for (const s of stacks.filter((x) => x.failed !== null)) await Promise.all([s.worker.kill9(), s.ingest.kill9()]);
  const finished = stacks.filter((s) => s.failed === null);
  for (const s of finished) await logged(s);
  // The backends' CPU is read now, while the services' pools still hold them (an idle pooled
  // connection closes after 10 s, and a backend gone is not counted).
  const pg1 = postgresCpuSeconds();
  const backendsOf = new Map<Stack, Set<number>>();
  for (const s of finished) backendsOf.set(s, await backendPids(s.prisma));
  // pg_stat_database is fed by each backend when it goes idle: at once, or within 10 s when it
  // flushed less than a second before (PostgreSQL 15's PGSTAT_IDLE_INTERVAL).
  await sleep(11_000);
  const shares = new Map<Stack, Share>();
  for (const [i, s] of stacks.entries()) {
    if (s.failed !== null) continue;
    const cpu1 = await cpuNow(s);
    const calls1 = await readCommands(s);
    const db1 = await databaseCounters(s.prisma);
    const backends = backendsOf.get(s) ?? new Set<number>();
    const cpuSeconds = new Map<(typeof CPU_PARTS)[number], number>();
    for (const part of CPU_PARTS) cpuSeconds.set(part, part === "postgres" ? postgresBackendsBetween(backends, pg0, pg1) : cpu1.get(part)! - cpu0[i]!.get(part)!);
    const database = Object.fromEntries(Object.entries(db1).map(([k, v]) => [k, v - db0[i]![k as keyof DatabaseCounters]])) as unknown as DatabaseCounters;
    shares.set(s, {
      rate: Math.min(expected, window!.counts[i]!) / (window!.ms / 1000),
      commandsByPrimary: calls1.map((after, n) => platformCommands(calls0[i]![n]!, after)),
      cpuSeconds,
      database,
      delivered: expected,
    });
  }
  return shares;
}

/** A stack's units taken together: per delivery. */
function condense(shares: readonly Share[]) {
  const delivered = shares.reduce((n, s) => n + s.delivered, 0);
  const primaryCount = shares[0]!.commandsByPrimary.length;
  const byPrimary = Array.from({ length: primaryCount }, (_, n) => addCounts(shares.map((s) => s.commandsByPrimary[n]!)));
  const all = addCounts(byPrimary);
  const cpuMs = new Map(CPU_PARTS.map((part) => [part, (shares.reduce((sum, s) => sum + s.cpuSeconds.get(part)!, 0) * 1000) / delivered] as const));
  const db = (k: keyof DatabaseCounters): number => shares.reduce((sum, s) => sum + s.database[k], 0) / delivered;
  const rates = shares.map((s) => s.rate).sort((a, b) => a - b);
  return {
    rate: rates[Math.floor(rates.length / 2)]!,
    commands: total(all) / delivered,
    scripts: ((all.get("evalsha") ?? 0) + (all.get("eval") ?? 0)) / delivered,
    top: [...all].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([name, n]) => `${name} ${(n / delivered).toFixed(1)}`).join(", "),
    shares: nodeShares(byPrimary.map(total)),
    cpuMs,
    database: { commits: db("commits"), inserted: db("inserted"), updated: db("updated"), bytes: db("bytes") },
  };
}

/** The comparison (see the file comment); prints its figures, its goals and `goals met: X of Y`. */
export async function compareTopologies(): Promise<void> {
  const clusterDatabaseUrl = process.env.DATABASE_URL_CLUSTER;
  if (!clusterDatabaseUrl) throw new Error("DATABASE_URL_CLUSTER is not set: run it as `BENCH_REDIS=cluster pnpm bench delivery` (scripts/bench.mjs creates the second database)");
  const goals = new GoalTally();
  const stacks: Stack[] = [];
  try {
    const standalone = await startStack("standalone", process.env.DATABASE_URL!);
    stacks.push(standalone);
    // A Cluster stack that cannot start (a service meeting CROSSSLOT at start-up) fails the
    // comparison's goals; the standalone stack still runs, for its own figures.
    let cluster: Stack | null = null;
    let clusterFailure: string | null = null;
    try {
      cluster = await startStack("cluster", clusterDatabaseUrl);
      stacks.push(cluster);
    } catch (err) {
      clusterFailure = `it did not start: ${briefly((err as Error).message)}`;
    }
    const events = Math.ceil(DELIVERIES / ENDPOINTS);
    log(
      `delivery benchmark on two Redis topologies side by side: a standalone redis-server, and a Redis Cluster of ${PRIMARIES} primaries with ${REPLICAS} replica(s) each ` +
        `(${cluster ? cluster.primaries.map((p) => p.address).join(", ") : "failed to start"}); each stack event-ingest and one delivery-worker (concurrency ${CONCURRENCY}), ${ENDPOINTS} endpoints, ` +
        `${events * ENDPOINTS} deliveries per unit in batches of ${BATCH} events from ${POSTERS} posters, ${ROUNDS} units after a warm-up` +
        `${QUEUE_SHARDS ? `, QUEUE_SHARDS=${QUEUE_SHARDS}` : ""}; Node ${process.version}`,
    );
    await unit(stacks, Math.ceil(2000 / ENDPOINTS));
    const perStack = new Map<Stack, Share[]>(stacks.map((st) => [st, []]));
    const ratios: number[] = [];
    for (let round = 0; round < ROUNDS && standalone.failed === null; round += 1) {
      const shares = await unit(stacks, events);
      for (const [st, share] of shares) perStack.get(st)!.push(share);
      const a = shares.get(standalone);
      const b = cluster ? shares.get(cluster) : undefined;
      if (a && b) ratios.push(b.rate / a.rate);
      log(`  unit ${round + 1}: standalone ${a ? `${a.rate.toFixed(0)} deliveries/s` : "failed"}, cluster ${b ? `${b.rate.toFixed(0)} deliveries/s beside it: ${((b.rate / (a?.rate ?? NaN)) * 100).toFixed(1)}%` : "failed"}`);
    }
    const fmt = (n: number, d = 0): string => n.toFixed(d);
    log("");
    const condensed = new Map<Stack, ReturnType<typeof condense>>();
    for (const st of stacks) {
      if (st.failed !== null) {
        log(`${st.topology}: FAILED: ${st.failed}`);
        continue;
      }
      const m = condense(perStack.get(st)!);
      condensed.set(st, m);
      const cpuTotal = [...m.cpuMs.values()].reduce((a, b) => a + b, 0);
      log(`${st.topology}: median ${fmt(m.rate)} deliveries/s beside the other stack; ${fmt(m.commands, 1)} Redis commands per delivery (${fmt(m.scripts, 2)} script calls): ${m.top}`);
      log(`  CPU ms per delivery: ${[...m.cpuMs].map(([part, ms]) => `${part} ${fmt(ms, 3)}`).join(", ")} = ${fmt(cpuTotal, 3)} (postgres: the backends of its database)`);
      log(
        `  one core's worth (1000 / CPU ms per delivery): worker ${fmt(1000 / m.cpuMs.get("worker")!)}, Redis ${fmt(1000 / m.cpuMs.get("redis")!)}, PostgreSQL backends ${fmt(1000 / m.cpuMs.get("postgres")!)} deliveries/s`,
      );
      log(
        `  its database per delivery: ${fmt(m.database.commits, 2)} commits, ${fmt(m.database.inserted, 2)} rows inserted, ${fmt(m.database.updated, 2)} updated, ${fmt(m.database.bytes)} bytes of growth`,
      );
    }
    const s = condensed.get(standalone);
    if (clusterFailure !== null) log(`cluster: FAILED: ${clusterFailure}`);
    const c = cluster ? condensed.get(cluster) : undefined;
    if (c && cluster) log(`  cluster primaries' shares of the delivery commands: ${cluster.primaries.map((p, i) => `${p.address} ${fmt(c.shares.shares[i]! * 100, 1)}%`).join(", ")}`);
    if (ingestRetries.count > 0) log(`  (ingest answered 503 ${ingestRetries.count} times under the machine's load; retried)`);
    const throughput = ratios.length > 0 && c ? Math.exp(ratios.reduce((sum, r) => sum + Math.log(r), 0) / ratios.length) : 0;
    goals.judge(throughput >= 0.9);
    log(`  end-to-end throughput, cluster / standalone = ${fmt(throughput * 100, 1)}% (paired units: ${ratios.map((r) => fmt(r * 100, 1)).join(", ") || "none"}) (goal >= 90%)`);
    const commandsRatio = s && c ? c.commands / s.commands : Infinity;
    goals.judge(commandsRatio <= 1.1);
    log(`  Redis commands per delivery, cluster / standalone = ${fmt(commandsRatio, 2)}x (${c ? fmt(c.commands, 1) : "-"} / ${s ? fmt(s.commands, 1) : "-"}) (goal <= 1.1x)`);
    const busiest = c?.shares.busiest ?? 1;
    goals.judge(busiest <= 0.45);
    log(`  busiest primary's share of the delivery commands = ${fmt(busiest * 100, 1)}% of ${PRIMARIES} primaries (goal <= 45%)`);
    log(goals.summary());
  } finally {
    for (const stack of stacks) await stack.stop();
  }
}
