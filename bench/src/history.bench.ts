/**
 * `pnpm bench history`: what a large delivery log costs. In one run, on its own database:
 * 1. seeds >= 10 million deliveries, their attempts and their events across 90 daily partitions
 *    (written in bulk with generate_series, straight into the partitions; the seeding time is
 *    printed), one endpoint holding 1 million of them, then CHECKPOINTs (a long-lived database has
 *    its history on disk, not in dirty buffers);
 * 2. end-to-end delivery throughput (events → event-ingest → the endpoints' drains in
 *    delivery-worker → receiver, with the log on) of two identical stacks side by side on the same PostgreSQL: one on an empty
 *    database (DATABASE_URL_EMPTY), one on the seeded one, in BENCH_ROUNDS alternating rounds so
 *    that both see the same machine; the medians are compared (goal: full >= 90% of empty);
 * 3. p99 of the history list query (pages, cursors, status/type/time/eventId filters, one delivery
 *    with attempts; each shape also printed alone) and of the 24 h stats query for that endpoint
 *    (goal: < 50 ms each);
 * 4. dropping the oldest day's partitions while deliveries flow (goal: < 1 s), with the longest
 *    write stall a probe writer sees meanwhile (goal: < 100 ms).
 * Sizes: BENCH_HISTORY_ROWS (10,000,000), BENCH_HISTORY_DAYS (90), BENCH_DELIVERIES (10,000 per run),
 * BENCH_ROUNDS (5).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createPgPool, createPrismaClient, deliveryCreatedAt, DeliveryHistory, DeliveryLog, LogPartitions, newDeliveryId, pgRunner, utcDay } from "@vw/db";
import { spawnService, type ServiceProcess } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import { deleteKeysUnder, postBurst, receiverReached, resetReceiver, startReceiver } from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { benchRedisEnv, benchRedisTopology } from "./lib/redis-target.js";
import { serviceDir } from "./lib/services.js";

const ROWS = Number(process.env.BENCH_HISTORY_ROWS ?? 10_000_000);
const DAYS = Number(process.env.BENCH_HISTORY_DAYS ?? 90);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ENDPOINTS = 10;
const BATCH = 100;
const POSTERS = 4;
const QUERY_RUNS = 300;
const INGEST_TOKEN = "bench-ingest-token-3d7a1f9c5e2b8046";
const DAY_MS = 86_400_000;

const databaseUrl = process.env.DATABASE_URL!;
const emptyDatabaseUrl = process.env.DATABASE_URL_EMPTY!;
const redis = benchRedisTopology();
const keyPrefix = `vwbench-${randomBytes(4).toString("hex")}`;
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);
const log = (msg: string): void => console.log(msg);
const goals = new GoalTally();
const fmt = (n: number, digits = 0): string => n.toFixed(digits);

const median = (samples: number[]): number => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)] ?? 0;
const p99 = (samples: number[]): number => [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor(0.99 * samples.length))] ?? 0;

/**
 * One day of history written straight into that day's partitions, as the log's statements would
 * have left it (but for the rollup, which serves only the last 24 h): `perDay` events with their
 * deduplication keys, deliveries (every 10th for `heavy`, the rest over `others`; 97% delivered,
 * 2% failed, 1% skipped) with UUIDv7 ids of their creation time, the final states of the failed
 * and skipped ones (a delivered one has none), and one attempt for each that was attempted.
 */
const SEED_DAY_SQL = (day: string) => {
  const p = day.replace(/-/g, "");
  return `
  WITH s AS (
    SELECT g, at, lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') AS h, md5($7 || g::text) AS r
    FROM (SELECT g, $1::timestamptz + g * ($3::float8 / $2) * interval '1 millisecond' AS at FROM generate_series(0, $2 - 1) AS g) x
  ), v AS (
    SELECT g, at,
      (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || substr(r, 4, 3) || '-' || substr(r, 7, 12))::uuid AS id,
      (substr(r, 1, 8) || '-' || substr(r, 9, 4) || '-4' || substr(r, 14, 3) || '-9' || substr(r, 18, 3) || '-' || substr(r, 21, 12))::uuid AS event_id,
      CASE WHEN g % 10 = 0 THEN $4::uuid ELSE ($5::uuid[])[1 + g % array_length($5::uuid[], 1)] END AS endpoint_id,
      CASE WHEN g % 100 < 97 THEN 'delivered' WHEN g % 100 < 99 THEN 'failed' ELSE 'skipped' END AS status
    FROM s
  ), e AS (
    INSERT INTO webhook_events_p${p} (id, world_id, producer_id, type, occurred_at, created_at)
    SELECT event_id, $6::uuid, 'seed-' || $7 || '-' || g, 'visitor.registered', at, at FROM v
  ), k AS (
    INSERT INTO webhook_event_keys (world_id, producer_id, created_at)
    SELECT $6::uuid, 'seed-' || $7 || '-' || g, at FROM v
  ), d AS (
    INSERT INTO webhook_deliveries_p${p} (id, endpoint_id, world_id, event_id, event_producer_id, type, body, test, created_at)
    SELECT id, endpoint_id, $6::uuid, event_id, 'seed-' || $7 || '-' || g, 'visitor.registered',
           convert_to('{"deliveryId":"' || id || '","type":"visitor.registered","data":{"seed":' || g || '}}', 'UTF8'),
           false, at
    FROM v
  ), st AS (
    INSERT INTO delivery_states (delivery_id, created_at, endpoint_id, status, run_attempts, attempt_count, last_status, test, updated_at)
    SELECT id, at, endpoint_id, status, (status = 'failed')::int, (status = 'failed')::int, CASE WHEN status = 'failed' THEN 410 END, false, at
    FROM v WHERE status <> 'delivered'
  )
  INSERT INTO delivery_attempts_p${p} (id, delivery_id, delivery_created_at, endpoint_id, attempt_number, trigger, started_at, request_headers,
                                       response_status, response_headers, response_body, duration_ms, verdict)
  SELECT md5('a' || $7 || g::text)::uuid, id, at, endpoint_id, 1, 'initial', at, '{"webhook-id":"seed"}'::jsonb,
         CASE WHEN status = 'failed' THEN 410 ELSE 200 END, '{}'::jsonb, 'ok', 20 + g % 80, CASE WHEN status = 'failed' THEN 'gone' ELSE 'delivered' END
  FROM v WHERE status <> 'skipped'`;
};

/** event-ingest and delivery-worker on one database, with a world of ENDPOINTS endpoints on the receiver. */
interface Stack {
  endToEnd: (deliveries: number) => Promise<number>;
  organizationSlug: string;
  worldId: string;
  endpointIds: string[];
  prisma: ReturnType<typeof createPrismaClient>;
  processes: ServiceProcess[];
}

async function startStack(dbUrl: string, receiverOrigin: string, prefix: string, processes: ServiceProcess[]): Promise<Stack> {
  const prisma = createPrismaClient(dbUrl);
  const commonEnv = { DATABASE_URL: dbUrl, ...benchRedisEnv(), REDIS_KEY_PREFIX: prefix, LOG_LEVEL: "warn" };
  const ingest = await spawnService(serviceDir("event-ingest"), { ...commonEnv, INGEST_TOKEN, SECRETS_ENCRYPTION_KEY: secretsKey });
  processes.push(ingest);
  processes.push(
    await spawnService(serviceDir("delivery-worker"), { ...commonEnv, SECRETS_ENCRYPTION_KEY: secretsKey, ENDPOINT_URL_POLICY: "any", DELIVERY_CONCURRENCY: "100" }),
  );
  const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
  const world = await prisma.world.create({ data: { organizationId: organization.id, slug: "history", name: "Bench", adminEmails: [] } });
  const endpointIds: string[] = [];
  for (let i = 0; i < ENDPOINTS; i += 1) {
    const endpoint = await prisma.webhookEndpoint.create({
      data: { worldId: world.id, url: `${receiverOrigin}/ok/${i}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
    });
    endpointIds.push(endpoint.id);
  }

  /** Events until `deliveries` deliveries reached the receiver; deliveries per second. */
  const endToEnd = async (deliveries: number): Promise<number> => {
    await resetReceiver(receiverOrigin);
    const events = Math.ceil(deliveries / ENDPOINTS);
    const start = Date.now();
    await postBurst(ingest.url, INGEST_TOKEN, `${organization.slug}/${world.slug}`, events, BATCH, POSTERS);
    const reached = await receiverReached(receiverOrigin, events * ENDPOINTS);
    return (events * ENDPOINTS) / ((reached.lastAt - start) / 1000);
  };
  return { endToEnd, organizationSlug: organization.slug, worldId: world.id, endpointIds, prisma, processes };
}

async function main(): Promise<void> {
  const pool = createPgPool(databaseUrl, { max: 6 });
  const receiver = await startReceiver();
  const processes: ServiceProcess[] = [];
  const prismas: ReturnType<typeof createPrismaClient>[] = [];
  try {
    const emptyStack = await startStack(emptyDatabaseUrl, receiver.origin, `${keyPrefix}-empty`, processes);
    prismas.push(emptyStack.prisma);
    const full = await startStack(databaseUrl, receiver.origin, `${keyPrefix}-full`, processes);
    prismas.push(full.prisma);
    const { worldId, endpointIds } = full;
    // The endpoint holding a million deliveries (list and stats) takes no new ones: its figures are the seeded ones.
    const heavy = await full.prisma.webhookEndpoint.create({
      data: { worldId, url: `${receiver.origin}/ok/heavy`, subscriptions: ["recording"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
    });

    log(`history benchmark: ${ROWS} deliveries over ${DAYS} daily partitions; end to end ${ROUNDS} alternating rounds of ${DELIVERIES} deliveries per stack, ${ENDPOINTS} endpoints`);
    await emptyStack.endToEnd(2000); // warm-up: JIT, pools, prepared statements
    await full.endToEnd(2000);

    // Seed: the days before today, oldest first, each straight into its own partitions.
    const seedStart = Date.now();
    const perDay = Math.ceil(ROWS / DAYS);
    const today = Date.parse(`${utcDay(new Date())}T00:00:00Z`);
    let oldestDay = "";
    for (let i = DAYS; i >= 1; i -= 1) {
      const day = utcDay(new Date(today - i * DAY_MS));
      oldestDay ||= day;
      await pool.query("SELECT vw_create_log_partitions($1::date, $1::date)", [day]);
      await pool.query(SEED_DAY_SQL(day), [`${day}T00:00:00Z`, perDay, DAY_MS, heavy.id, endpointIds, worldId, day]);
      if (i % 10 === 0) console.error(`[history] seeded ${DAYS - i + 1}/${DAYS} days in ${fmt((Date.now() - seedStart) / 1000)} s`);
    }
    const seedLoad = (Date.now() - seedStart) / 1000;
    await pool.query("ANALYZE webhook_events; ANALYZE webhook_event_keys; ANALYZE webhook_deliveries; ANALYZE delivery_states; ANALYZE delivery_attempts");
    // The heavy endpoint's last 24 h in the rollup, as the log's statements would have left it (288 buckets x 4 writers).
    await pool.query(
      `INSERT INTO endpoint_stats (endpoint_id, bucket, shard, delivered, failed, skipped, attempts, attempts_succeeded, latency_counts, latency_max_ms, last_attempt_at, last_attempt_status, last_attempt_outcome)
       SELECT $1::uuid, vw_stats_bucket(now()) - b * interval '5 minutes', s, 38, 1, 0, 40, 38, ARRAY[0,0,3,20,10,5,2,0,0,0,0,0,0,0,0,0,0,0,0,0,0], 140, now() - b * interval '5 minutes', 200, 'delivered'
       FROM generate_series(0, 287) b, generate_series(1, 4) s`,
      [heavy.id],
    );
    const seedSeconds = (Date.now() - seedStart) / 1000;
    const checkpointStart = Date.now();
    await pool.query("CHECKPOINT");
    const checkpointSeconds = (Date.now() - checkpointStart) / 1000;
    const { rows: sizeRows } = await pool.query<{ n: string; size: string }>(
      "SELECT (SELECT count(*) FROM webhook_deliveries)::text AS n, pg_size_pretty(pg_database_size(current_database())) AS size",
    );

    // Both stacks, alternating (empty first in odd rounds, full first in even ones).
    const emptyRates: number[] = [];
    const fullRates: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const order = round % 2 === 0 ? ([emptyStack, full] as const) : ([full, emptyStack] as const);
      for (const stack of order) (stack === full ? fullRates : emptyRates).push(await stack.endToEnd(DELIVERIES));
    }

    // History reads of the 1M-delivery endpoint, as admin-api makes them (same statements; pg runner).
    const history = new DeliveryHistory(pgRunner(pool));
    const firstPage = (await history.list(heavy.id, {}, { limit: 51 }))!;
    const queries: [string, () => Promise<unknown>][] = [
      ["first page", () => history.list(heavy.id, {}, { limit: 51 })],
      ["next page (cursor)", () => history.list(heavy.id, {}, { limit: 51, after: firstPage.at(-1)!.id })],
      ["status delivered", () => history.list(heavy.id, { status: "delivered" }, { limit: 51 })],
      ["status failed (none)", () => history.list(heavy.id, { status: "failed" }, { limit: 51 })],
      ["type (none)", () => history.list(heavy.id, { type: "member.connecting" }, { limit: 51 })],
      ["type + one day", () => history.list(heavy.id, { type: "visitor.registered", since: new Date(today - 30 * DAY_MS), until: new Date(today - 29 * DAY_MS) }, { limit: 51 })],
      ["eventId", () => history.list(heavy.id, { eventId: `seed-${utcDay(new Date(today - 45 * DAY_MS))}-1230` }, { limit: 51 })],
      ["one delivery + attempts", () => history.get(heavy.id, firstPage[7]!.id)],
    ];
    const listSamples: number[] = [];
    const byShape = new Map<string, number[]>(queries.map(([name]) => [name, []]));
    const statsSamples: number[] = [];
    for (let i = 0; i < QUERY_RUNS; i += 1) {
      const [name, query] = queries[i % queries.length]!;
      let t = performance.now();
      await query();
      const ms = performance.now() - t;
      listSamples.push(ms);
      byShape.get(name)!.push(ms);
      t = performance.now();
      await history.stats(heavy.id);
      statsSamples.push(performance.now() - t);
    }

    // Drop the oldest day while deliveries flow; a probe writer measures its own write latency.
    const log1 = new DeliveryLog(pgRunner(pool));
    const probe = endpointIds[0]!;
    let probing = true;
    let dropping = false;
    let stallDuringDrop = 0;
    let stallBefore = 0;
    const prober = (async () => {
      while (probing) {
        const id = newDeliveryId();
        const t = performance.now();
        await log1.create([{ id, endpointId: probe, worldId, type: "visitor.registered", body: Buffer.from("{}") }]);
        await log1.record([
          {
            attempt: { id: randomUUID(), deliveryId: id, attemptNumber: 1, trigger: "initial", startedAt: new Date(), requestHeaders: {}, responseStatus: 200, responseHeaders: {}, responseBody: "ok", responseBodyTruncated: false, durationMs: 1, errorKind: null, error: null, verdict: "delivered" },
            endpointId: probe,
            deliveryCreatedAt: deliveryCreatedAt(id),
            becomes: "delivered",
            dueAt: null,
            waitReason: null,
            run: 0,
            failures: "none",
          },
        ]);
        const ms = performance.now() - t;
        if (dropping) stallDuringDrop = Math.max(stallDuringDrop, ms);
        else stallBefore = Math.max(stallBefore, ms);
      }
    })();
    const flowing = full.endToEnd(DELIVERIES);
    await new Promise((r) => setTimeout(r, 3000));
    dropping = true;
    const dropStart = performance.now();
    const dropped = await new LogPartitions(pool).dropExpired(Math.floor((Date.now() - Date.parse(`${oldestDay}T00:00:00Z`)) / DAY_MS) - 1);
    const dropMs = performance.now() - dropStart;
    await new Promise((r) => setTimeout(r, 500));
    dropping = false;
    const duringDrop = await flowing;
    probing = false;
    await prober;

    const rates = (xs: number[]) => xs.map((x) => fmt(x)).join(", ");
    log("");
    log(`seeding: ${sizeRows[0]!.n} deliveries (+ as many events, and attempts) in ${DAYS} daily partitions, database ${sizeRows[0]!.size}: ${fmt(seedSeconds)} s (bulk inserts ${fmt(seedLoad)} s, then ANALYZE), CHECKPOINT ${fmt(checkpointSeconds)} s`);
    log(`end to end, empty history:            median ${fmt(median(emptyRates))} deliveries/s (rounds: ${rates(emptyRates)})`);
    log(`end to end, ${(ROWS / 1e6).toFixed(0)}M deliveries stored:  median ${fmt(median(fullRates))} deliveries/s (rounds: ${rates(fullRates)})`);
    goals.judge(median(fullRates) / median(emptyRates) >= 0.9);
    log(`  = ${fmt((median(fullRates) / median(emptyRates)) * 100, 1)}% of the empty-history throughput (goal >= 90%)`);
    goals.judge(p99(listSamples) < 50);
    log(`history list of an endpoint with ${(ROWS / 10 / 1e6).toFixed(1)}M deliveries: p99 ${fmt(p99(listSamples), 1)} ms over ${QUERY_RUNS} (goal < 50 ms)`);
    for (const [name, samples] of byShape) log(`  ${name.padEnd(24)} p50 ${fmt(median(samples), 1)} ms, max ${fmt(Math.max(...samples), 1)} ms`);
    goals.judge(p99(statsSamples) < 50);
    log(`24 h stats of that endpoint: p99 ${fmt(p99(statsSamples), 1)} ms over ${QUERY_RUNS} (goal < 50 ms)`);
    goals.judge(dropMs < 1000);
    log(`drop of one day (${dropped.map((d) => d.partition).join(", ")}) while deliveries flow: ${fmt(dropMs)} ms (goal < 1000 ms)`);
    goals.judge(stallDuringDrop < 100);
    log(`  longest write stall meanwhile (probe: create + record one delivery): ${fmt(stallDuringDrop, 1)} ms (goal < 100 ms); before the drop: ${fmt(stallBefore, 1)} ms`);
    log(`  end-to-end throughput across the drop: ${fmt(duringDrop)} deliveries/s`);
    log(goals.summary());
  } finally {
    for (const p of processes) await p.kill9();
    receiver.stop();
    await deleteKeysUnder(redis, keyPrefix);
    await pool.end();
    for (const prisma of prismas) await prisma.$disconnect();
  }
}

await main();
