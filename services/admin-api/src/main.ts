import { createPgPool, createPrismaClientOnPool, pgRunner } from "@vw/db";
import { QUEUE_NAMES, closeRedisConnection, createRedisConnection, openDeliveryQueues, openQueue } from "@vw/queues";
import { closeServer, createLogger, describeRedisTopology, listen, loadConfigOrExit, logProcessWarnings, redisClientErrorListener, registerShutdown, watchRedisConnection, startTracing } from "@vw/service-kit";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents } from "@vw/webhook-core";
import { DASHBOARD_ASSETS_DIR } from "@vw/dashboard/assets-dir";
import { createAdminApp } from "./app.js";
import { loadConfig } from "./config.js";


const config = loadConfigOrExit("admin-api", () => loadConfig(process.env));

const logger = createLogger("admin-api", config.logLevel, config.logFormat);
// Before any client is built: Node's plain-text warnings would break the JSON log stream.
logProcessWarnings(logger);
// OTEL_* variables: spans over OTLP, or nothing at all (no SDK loaded) when no endpoint is set.
const tracing = await startTracing(config.tracing, "admin-api", logger);
// The process's one pool (DATABASE_POOL_MAX connections to DATABASE_URL at most, application_name
// "admin-api"): Prisma (admin CRUD) runs over it, and so does the one runner of the shared tables'
// owners (the app builds each once).
const pool = createPgPool(config.database, {
  max: config.database.poolMax,
  onIdleError: (err) => logger.warn({ err: err.message }, "idle database connection failed; it is replaced on the next query"),
});
const prisma = createPrismaClientOnPool(pool);
// A producer connection: a request fails fast (503) while Redis is away instead of hanging.
const redis = createRedisConnection(config.redis, "producer");
const deliveryQueue = openDeliveryQueues(redis, config.redisKeyPrefix, config.queueShards);
// Connection errors (the queues re-emit their connection's) are one line per outage, not per retry.
watchRedisConnection(redis, logger);
for (const shard of deliveryQueue.shards) shard.on("error", redisClientErrorListener(logger, "delivery queue error"));
const recoveryQueue = openQueue(QUEUE_NAMES.recoveries, redis, config.redisKeyPrefix);
recoveryQueue.on("error", redisClientErrorListener(logger, "recovery queue error"));
const deliveryAgents = createDeliveryAgents(config.endpointUrlPolicy, { proxy: config.deliveryProxy });

const app = createAdminApp({
  prisma,
  // Named prepared statements (plain ones behind PgBouncer): the Inbound API's member lookup is not compiled by Prisma on every call.
  sql: pgRunner(pool),
  logger,
  adminToken: config.adminToken,
  publicMapStorageUrl: config.publicMapStorageUrl,
  ...(config.mapStorageInternalUrl === undefined ? {} : { mapStorageInternalUrl: config.mapStorageInternalUrl }),
  playUrl: config.playUrl,
  // loadConfig has already built a box from these keys, so this cannot throw.
  secretBox: createSecretBox(config.secretsEncryptionKey),
  endpointUrlPolicy: config.endpointUrlPolicy,
  deliveryQueue,
  recoveryQueue,
  deliveryAgents,
  deliveryTimeoutMs: config.deliveryTimeoutMs,
  apiKeyCacheTtlMs: config.apiKeyCacheTtlMs,
  publicAdminUrl: config.publicAdminUrl,
  dashboardFrameAncestors: config.dashboardFrameAncestors,
  dashboardAssetsDir: DASHBOARD_ASSETS_DIR,
  endpointQuotas: config.endpointQuotas,
  maxStorageBytesPerWorld: config.maxStorageBytesPerWorld,
  // Failed-authentication counters live beside the queues, so every replica sees every failure.
  throttleRedis: redis,
  authThrottle: config.authThrottle,
  redisKeyPrefix: config.redisKeyPrefix,
  trustProxy: config.trustProxy,
});
const server = await listen(app, config.port, config.host, logger);
logger.info(
  {
    port: config.port,
    publicMapStorageUrl: config.publicMapStorageUrl,
    playUrl: config.playUrl,
    endpointUrlPolicy: config.endpointUrlPolicy,
    // Its address only: the credentials are never logged.
    deliveryProxy: config.deliveryProxy?.address ?? null,
    redis: describeRedisTopology(config.redis),
    redisKeyPrefix: config.redisKeyPrefix,
    databasePoolMax: config.database.poolMax,
    pgbouncer: config.database.pgbouncer,
    publicAdminUrl: config.publicAdminUrl,
    dashboardFrameAncestors: config.dashboardFrameAncestors,
  },
  "admin-api listening",
);

registerShutdown(logger, [
  { name: "http", run: () => closeServer(server) },
  { name: "delivery queue", run: () => deliveryQueue.close() },
  { name: "recovery queue", run: () => recoveryQueue.close() },
  // QUIT needs a live connection; one that is down is simply dropped.
  { name: "redis", run: () => closeRedisConnection(redis) },
  { name: "delivery agents", run: async () => destroyDeliveryAgents(deliveryAgents) },
  { name: "tracing", run: () => tracing.shutdown() },
  // Prisma first (it leaves the pool open), then the pool.
  { name: "database", run: async () => { await prisma.$disconnect(); await pool.end(); } },
]);
