import { createPgPool } from "@vw/db";
import { closeRedisConnection, createRedisConnection, openDeliveryQueues } from "@vw/queues";
import {
  Counter,
  METRICS_PREFIX,
  closeServer,
  createLogger,
  createServiceMetrics,
  dependencyStatus,
  describeRedisTopology,
  listen,
  loadConfigOrExit,
  logProcessWarnings,
  redisClientErrorListener,
  registerShutdown,
  watchRedisConnection,
  startTracing,
} from "@vw/service-kit";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents } from "@vw/webhook-core";
import { pseudonymKey } from "./analytics-privacy.js";
import { AnalyticsIntake } from "./analytics.service.js";
import { createIngestApp } from "./app.js";
import { DeferredHookCalls } from "./auth-hook-deferred.js";
import { AuthHookService, type HookTarget } from "./auth-hook.service.js";
import { loadConfig } from "./config.js";
import { ingestDatabase } from "./database.js";
import { WorldSettingsCache, WorldSettingsListener } from "./world-settings-cache.js";

const config = loadConfigOrExit("event-ingest", () => loadConfig(process.env));

const logger = createLogger("event-ingest", config.logLevel, config.logFormat);
// Before any client is built: Node's plain-text warnings would break the JSON log stream.
logProcessWarnings(logger);
// OTEL_* variables: spans over OTLP, or nothing at all (no SDK loaded) when no endpoint is set.
const tracing = await startTracing(config.tracing, "event-ingest", logger);
// The process's one pool (DATABASE_POOL_MAX connections to DATABASE_URL at most, application_name
// "event-ingest"), one runner over it and each owner built once (database.ts): the event intake,
// the member intake, analytics and the auth hook all go through it.
const pool = createPgPool(config.database, {
  max: config.database.poolMax,
  onIdleError: (err) => dependencyStatus(logger, "postgresql").down(err, { client: "pool" }),
});
pool.on("connect", () => dependencyStatus(logger, "postgresql").up());
const db = ingestDatabase(pool);
const redis = createRedisConnection(config.redis, "producer");
// Without a listener, an `error` event (Redis restarting) would crash the process; requests see the
// failure as a 503, and the log gets one line when Redis goes and one when it is back.
watchRedisConnection(redis, logger);
const queue = openDeliveryQueues(redis, config.redisKeyPrefix, config.queueShards);
for (const shard of queue.shards) shard.on("error", redisClientErrorListener(logger, "deliveries queue error"));

// The auth hook's HTTP agents enforce ENDPOINT_URL_POLICY at connect time, like the worker's.
const deliveryAgents = createDeliveryAgents(config.endpointUrlPolicy, { proxy: config.deliveryProxy });
if (config.endpointUrlPolicy === "any") {
  logger.warn(
    { endpointUrlPolicy: "any" },
    "ENDPOINT_URL_POLICY=any: the auth hook connects to ANY address (plain http, loopback, private). For development and tests only.",
  );
}
// Worlds and their auth endpoints, cached while a LISTEN connection (to DIRECT_URL, on top of the
// pool's budget) reports every change.
const hookCache = new WorldSettingsCache<HookTarget>();
const hookCacheListener = new WorldSettingsListener(config.database, hookCache, logger);
await hookCacheListener.start();
const metrics = createServiceMetrics("event-ingest");
const deferredDropped = new Counter({
  name: `${METRICS_PREFIX}auth_hook_deferred_dropped_total`,
  help: "Auth hook calls past the answer's budget that were never made: too many were waiting in this process.",
  registers: [metrics.registry],
});
const authHook = new AuthHookService(db, {
  cache: hookCache,
  playUrl: config.playUrl,
  // loadConfig has already built a box from these keys, so this cannot throw.
  secretBox: createSecretBox(config.secretsEncryptionKey),
  agents: deliveryAgents,
  timeoutMs: config.authHookTimeoutMs,
  logger,
  deferred: new DeferredHookCalls({ logger, onDropped: (calls) => deferredDropped.inc(calls) }),
});

const app = createIngestApp({
  db,
  redis,
  queue,
  logger,
  ingestToken: config.ingestToken,
  playUrl: config.playUrl,
  maxEventsPerRequest: config.maxEventsPerRequest,
  analyticsEventMaxBytes: config.analyticsEventMaxBytes,
  authHook,
  analytics: new AnalyticsIntake(db, redis, logger, {
    keyPrefix: config.redisKeyPrefix,
    pseudonymKey: pseudonymKey(config.analyticsPseudonymKey, config.secretsEncryptionKey),
    bufferMax: config.analyticsBufferMax,
    worldBufferMax: config.analyticsBufferMaxPerWorld,
    worldBufferMaxBytes: config.analyticsBufferMaxBytesPerWorld,
    registry: metrics.registry,
  }),
  metrics,
  authThrottle: config.authThrottle,
  redisKeyPrefix: config.redisKeyPrefix,
  trustProxy: config.trustProxy,
});
const server = await listen(app, config.port, config.host, logger);
logger.info(
  {
    port: config.port,
    playUrl: config.playUrl,
    redis: describeRedisTopology(config.redis),
    redisKeyPrefix: config.redisKeyPrefix,
    maxEventsPerRequest: config.maxEventsPerRequest,
    databasePoolMax: config.database.poolMax,
    pgbouncer: config.database.pgbouncer,
    // Its address only: the credentials are never logged.
    deliveryProxy: config.deliveryProxy?.address ?? null,
  },
  "event-ingest listening",
);

registerShutdown(logger, [
  { name: "http", run: () => closeServer(server) },
  // Hook calls past the budget and history rows happen after the answer: let them land before the pool goes.
  { name: "auth hook history", run: () => authHook.drain() },
  { name: "delivery agents", run: async () => destroyDeliveryAgents(deliveryAgents) },
  {
    name: "queue",
    run: () => queue.close(),
  },
  { name: "redis", run: () => closeRedisConnection(redis) },
  { name: "tracing", run: () => tracing.shutdown() },
  { name: "database", run: async () => void (await Promise.all([pool.end(), hookCacheListener.stop()])) },
]);
