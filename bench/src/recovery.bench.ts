/**
 * `pnpm bench recovery`: what it takes to rebuild Redis from PostgreSQL, the schedule of record.
 *
 * A delivery-worker runs against a private Redis (no persistence) and the benchmark's database.
 * The Redis is killed; meanwhile BENCH_RECOVERY_DELIVERIES (100,000) pending, due deliveries are
 * stored in PostgreSQL over BENCH_RECOVERY_ENDPOINTS (20) endpoints of a receiver that answers at
 * once: deliveries whose wakes were lost with Redis. Then Redis is started again, EMPTY, at T0.
 * The worker's reconciler sees its index marker gone and wakes every endpoint with pending
 * deliveries from PostgreSQL (one drain job each), whose drains then claim and send them.
 *
 * Goals (this 2-core machine):
 * - the first delivery arrives less than 5 s after T0;
 * - every endpoint with pending deliveries is woken again within 60 s of T0 (the reconciler's rebuild);
 * - all of them arrive, each once per deliveryId on this quiet path (copies are counted), and
 *   none is left pending in PostgreSQL.
 * Printed too: the delivery rate afterwards.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { DeliveryLog, createPgPool, createPrismaClient, newDeliveryId, pgRunner, type NewDelivery } from "@vw/db";
import { RUNTIME_NODE_FLAGS, eventually, spawnService, startRedis, type ServiceProcess } from "@vw/testing";
import { buildEnvelope, createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import { metricValue, receiverStats, resetReceiver, startReceiver } from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { serviceDir } from "./lib/services.js";

const DELIVERIES = Number(process.env.BENCH_RECOVERY_DELIVERIES ?? 100_000);
const ENDPOINTS = Number(process.env.BENCH_RECOVERY_ENDPOINTS ?? 20);
/** Rows per insert statement while storing the deliveries. */
const INSERT_BATCH = 5000;

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) {
  console.error("DATABASE_URL is not set: run it as `pnpm bench recovery`");
  process.exit(2);
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function main(): Promise<void> {
  const goals = new GoalTally();
  const prisma = createPrismaClient(databaseUrl!, { max: 2 });
  const pool = createPgPool(databaseUrl!, { max: 2 });
  const receiver = await startReceiver();
  const redis = await startRedis();
  let worker: ServiceProcess | undefined;
  try {
    const secretsKey = generateSecretBoxKey();
    const box = createSecretBox(secretsKey);
    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
    const world = await prisma.world.create({ data: { organizationId: organization.id, slug: "recovery", name: "Recovery", adminEmails: [] } });
    const endpoints: string[] = [];
    for (let i = 0; i < ENDPOINTS; i += 1) {
      const row = await prisma.webhookEndpoint.create({
        data: { worldId: world.id, url: `${receiver.origin}/ok/${i}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
      });
      endpoints.push(row.id);
    }

    worker = await spawnService(
      serviceDir("delivery-worker"),
      { DATABASE_URL: databaseUrl!, REDIS_URL: redis.url, REDIS_KEY_PREFIX: "bench-recovery", SECRETS_ENCRYPTION_KEY: secretsKey, ENDPOINT_URL_POLICY: "any", LOG_LEVEL: "warn" },
      { nodeArgs: [...RUNTIME_NODE_FLAGS], readyTimeoutMs: 60_000 },
    );
    const running = worker;
    // The first rebuild (an empty schedule) sets the index marker: from then on it is Redis's.
    const indexed = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    await eventually("the worker indexed its (empty) schedule", async () => (await indexed.keys("bench-recovery:*:indexed")).length > 0, { timeoutMs: 30_000 });
    indexed.disconnect();

    await redis.kill("SIGKILL");
    console.log(`Redis killed; storing ${DELIVERIES} pending, due deliveries over ${ENDPOINTS} endpoints in PostgreSQL`);
    const log = new DeliveryLog(pgRunner(pool));
    const storing = Date.now();
    for (let done = 0; done < DELIVERIES; done += INSERT_BATCH) {
      const rows: NewDelivery[] = [];
      for (let i = done; i < Math.min(DELIVERIES, done + INSERT_BATCH); i += 1) {
        const id = newDeliveryId();
        const body = buildEnvelope({
          deliveryId: id,
          apiVersion: "2026-11-01",
          type: "visitor.registered",
          timestamp: new Date().toISOString(),
          world: { slug: world.slug, url: `https://play.example.test/@/${organization.slug}/${world.slug}` },
          data: { uuid: id, name: "Ada", email: "ada@example.com", via: "sso" },
        });
        rows.push({ id, endpointId: endpoints[i % ENDPOINTS]!, worldId: world.id, type: "visitor.registered", body });
      }
      await log.create(rows);
    }
    await pool.query("ANALYZE webhook_deliveries; ANALYZE delivery_states");
    console.log(`stored in ${seconds(Date.now() - storing)}`);
    await resetReceiver(receiver.origin);

    await redis.restart({ empty: true });
    const t0 = Date.now();
    console.log("Redis started again, empty");
    // The rebuild counts the endpoints it woke (a drain each), not their deliveries.
    const wokenAt = await eventually(
      "every endpoint was woken again",
      async () => ((await metricValue(running, 'vw_deliveries_reconciled_total{reason="rebuild"}')) >= ENDPOINTS ? Date.now() : 0),
      { timeoutMs: 600_000, intervalMs: 200 },
    );
    const arrived = await eventually(
      "every delivery arrived",
      async () => {
        const stats = await receiverStats(receiver.origin);
        return stats.count >= DELIVERIES ? stats : null;
      },
      { timeoutMs: 1_800_000, intervalMs: 500 },
    );
    // Delivered: stored, and no state left (a delivery that is not delivered has one).
    const stored = await prisma.webhookDelivery.count({ where: { worldId: world.id } });
    const deliveredRows = await eventually(
      "every delivery is recorded as delivered",
      async () => {
        const open = await prisma.deliveryState.count({ where: { endpointId: { in: endpoints } } });
        return open === 0 ? stored : null;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    ).catch(async () => stored - (await prisma.deliveryState.count({ where: { endpointId: { in: endpoints } } })));

    const firstMs = arrived.firstAt - t0;
    const wokenMs = wokenAt - t0;
    const allMs = arrived.lastAt - t0;
    console.log(`first delivery ${seconds(firstMs)} after Redis came back ${goals.judge(firstMs < 5000) ? "" : "NOT MET "}(goal < 5 s)`);
    console.log(`all ${ENDPOINTS} endpoints with pending deliveries woken again within ${seconds(wokenMs)} ${goals.judge(wokenMs <= 60_000) ? "" : "NOT MET "}(goal <= 60 s)`);
    const allArrived = arrived.count >= DELIVERIES && deliveredRows === DELIVERIES;
    console.log(
      `all arrived: ${arrived.count} requests for ${deliveredRows} delivered rows of ${DELIVERIES} in ${seconds(allMs)} (${Math.round(DELIVERIES / (allMs / 1000))} deliveries/s), ` +
        `${arrived.count - DELIVERIES} extra copies ${goals.judge(allArrived) ? "" : "NOT MET "}(goal: every one)`,
    );
  } finally {
    await worker?.stop();
    receiver.stop();
    await redis.stop();
    await prisma.$disconnect();
    await pool.end();
  }
  console.log(goals.summary());
}

await main();
