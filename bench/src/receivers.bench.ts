/**
 * `pnpm bench receivers`: how the platform treats an overloaded receiver, by itself. A world has
 * two endpoints, each getting every event: one on a receiver that holds each request 20 ms and
 * answers 429 to whatever comes while 3 are already in flight (a receiver behind a concurrency
 * limit: its own rate limiter, a small pool), one healthy. BENCH_DELIVERIES events are posted at
 * once (a Recover of a backlog looks the same), then the run waits until both endpoints got every
 * one. Goals:
 * - the limited receiver gets every delivery, and at most 10% of all attempts to it were
 *   answered 429 (a fixed window of 10 in flight sent about 28%);
 * - the healthy endpoint beside it keeps its throughput: its deliveries arrive at least at 90% of
 *   the rate of a healthy endpoint in a run where both endpoints are healthy.
 * The worker retries every second (RETRY_DELAYS=1s x 9): the run measures how the window adapts,
 * not the retry schedule, whose 5-minute second step would make a delivery answered 429 twice wait
 * that long. Expects DATABASE_URL and REDIS_URL (scripts/bench.mjs provides them); uses a Redis of
 * its own.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createPrismaClient } from "@vw/db";
import { spawnService, type ServiceProcess } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import { postBurst, receiverStats, resetReceiver, startPrivateRedis, startReceiver } from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { serviceDir } from "./lib/services.js";

const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 2000);
const INGEST_TOKEN = "bench-ingest-token-5c2e8a7d1f9b3064";
const databaseUrl = process.env.DATABASE_URL!;
const log = (msg: string): void => console.log(msg);
const goals = new GoalTally();

async function main(): Promise<void> {
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startReceiver();
  const redis = await startPrivateRedis();
  const secretsKey = generateSecretBoxKey();
  const box = createSecretBox(secretsKey);
  const processes: ServiceProcess[] = [];
  try {
    const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, REDIS_KEY_PREFIX: `vwbench-${randomBytes(4).toString("hex")}`, LOG_LEVEL: "warn", SECRETS_ENCRYPTION_KEY: secretsKey };
    const ingest = await spawnService(serviceDir("event-ingest"), { ...env, INGEST_TOKEN });
    processes.push(ingest);
    processes.push(await spawnService(serviceDir("delivery-worker"), { ...env, ENDPOINT_URL_POLICY: "any", RETRY_DELAYS: Array(9).fill("1s").join(",") }));
    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
    /** A world whose two endpoints are at these paths of the receiver. */
    const world = async (paths: [string, string]) => {
      const w = await prisma.world.create({ data: { organizationId: organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
      await prisma.webhookEndpoint.createMany({
        data: paths.map((path) => ({
          worldId: w.id,
          url: `${receiver.origin}/${path}/${randomUUID()}`,
          subscriptions: ["visitor"],
          format: "current",
          apiVersion: "2026-11-01",
          secretSealed: box.seal(generateSecret()),
        })),
      });
      return `${organization.slug}/${w.slug}`;
    };
    /** Posts `events` to `target` at once; resolves when `done` says everything arrived, with the healthy endpoint's rate. */
    const run = async (target: string, done: (s: Awaited<ReturnType<typeof receiverStats>>) => boolean) => {
      await resetReceiver(receiver.origin);
      const start = Date.now();
      await postBurst(ingest.url, INGEST_TOKEN, target, DELIVERIES, 100, 4);
      let stats = await receiverStats(receiver.origin);
      let okAt = 0;
      while (!done(stats)) {
        if (okAt === 0 && stats.count >= DELIVERIES) okAt = stats.lastAt;
        await new Promise((r) => setTimeout(r, 100));
        stats = await receiverStats(receiver.origin);
      }
      const healthyRate = DELIVERIES / (((okAt || stats.lastAt) - start) / 1000);
      return { stats, healthyRate, seconds: (Date.now() - start) / 1000 };
    };

    log(`receivers benchmark: ${DELIVERIES} events to a world of two endpoints, one healthy and one answering 429 above 3 requests in flight`);
    // Warm-up, then the baseline: both endpoints healthy.
    await run(await world(["ok", "ok"]), (s) => s.count >= 2 * 200);
    const baseline = await run(await world(["ok", "ok"]), (s) => s.count >= 2 * DELIVERIES);
    const limited = await run(await world(["ok", "limited"]), (s) => s.count >= DELIVERIES && s.limitedOk >= DELIVERIES);
    const s = limited.stats;
    const attempts = s.limitedOk + s.limited429;
    log("");
    log(`both healthy: ${DELIVERIES * 2} deliveries in ${baseline.seconds.toFixed(1)} s (a healthy endpoint's: ${baseline.healthyRate.toFixed(0)}/s)`);
    goals.judge(s.limitedOk >= DELIVERIES && s.limited429 / attempts <= 0.1);
    log(
      `overloaded receiver: ${s.limitedOk} of ${DELIVERIES} delivered in ${limited.seconds.toFixed(1)} s, ${attempts} attempts, ${s.limited429} answered 429 = ` +
        `${((s.limited429 / attempts) * 100).toFixed(1)}% (goal: every delivery, <= 10% answered 429); at most ${s.limitedMost} in flight`,
    );
    goals.judge(limited.healthyRate >= 0.9 * baseline.healthyRate);
    log(
      `healthy endpoint beside it: ${limited.healthyRate.toFixed(0)} deliveries/s = ${((limited.healthyRate / baseline.healthyRate) * 100).toFixed(0)}% of a healthy endpoint's with a healthy neighbour (goal >= 90%)`,
    );
    log(goals.summary());
  } finally {
    for (const p of processes) await p.kill9();
    receiver.stop();
    await redis.stop();
    await prisma.$disconnect();
  }
}

await main();
