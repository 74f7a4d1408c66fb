import { createPgPool } from "@vw/db";
import { closeRedisConnection, createRedisConnection } from "@vw/queues";
import { closeServer, createLogger, dependencyStatus, describeRedisTopology, listen, loadConfigOrExit, logProcessWarnings, registerShutdown, watchRedisConnection, startTracing } from "@vw/service-kit";
import { createSecretBox } from "@vw/webhook-core";
import { createWorkerApp } from "./app.js";
import { startDeliveryWorker } from "./compose.js";
import { loadConfig } from "./config.js";
import { smtpTransport } from "./mailer.js";

const config = loadConfigOrExit("delivery-worker", () => loadConfig(process.env));
const logger = createLogger("delivery-worker", config.logLevel, config.logFormat);
// Before any client is built: Node's plain-text warnings would break the JSON log stream.
logProcessWarnings(logger);
// OTEL_* variables: spans over OTLP, or nothing at all (no SDK loaded) when no endpoint is set.
const tracing = await startTracing(config.tracing, "delivery-worker", logger);
if (config.endpointUrlPolicy === "any") {
  logger.warn({ endpointUrlPolicy: "any" }, "ENDPOINT_URL_POLICY=any: deliveries may go to loopback and private addresses. Development and tests only.");
}
if (config.smtpUrl === null) {
  logger.warn("SMTP_URL is not set: administrators will NOT be e-mailed when an endpoint is disabled (the mails are logged instead).");
}

// The process's one way to PostgreSQL: the drains' claims and group commits (delivery-store.ts: one
// of each at a time), disables, recoveries, the flush, the reconciler, /readyz.
const pool = createPgPool(config.database, {
  max: config.database.poolMax,
  onIdleError: (err) => dependencyStatus(logger, "postgresql").down(err, { client: "delivery pool" }),
});
pool.on("connect", () => dependencyStatus(logger, "postgresql").up());
const redis = createRedisConnection(config.redis, "worker");
// Without it ioredis prints each reconnect attempt's stack trace to stderr; now one line per outage.
watchRedisConnection(redis, logger);
const mail = config.smtpUrl === null ? null : smtpTransport(config.smtpUrl);

const worker = await startDeliveryWorker({
  pool,
  connection: redis,
  keyPrefix: config.redisKeyPrefix,
  queueShards: config.queueShards,
  logger,
  // loadConfig has already built a box from these keys, so this cannot throw.
  secretBox: createSecretBox(config.secretsEncryptionKey),
  endpointUrlPolicy: config.endpointUrlPolicy,
  deliveryProxy: config.deliveryProxy,
  deliveryTimeoutMs: config.deliveryTimeoutMs,
  retryDelays: config.retryDelays,
  disableAfterFailures: config.disableAfterFailures,
  deliveryConcurrency: config.deliveryConcurrency,
  endpointConcurrency: config.endpointConcurrency,
  retryAfterMaxMs: config.retryAfterMaxMs,
  drainLingerMs: config.drainLingerMs,
  retentionDays: config.deliveryRetentionDays,
  partitionsAheadDays: config.partitionsAheadDays,
  retentionIntervalMs: config.retentionIntervalMs,
  jobLockMs: config.jobLockMs,
  reconcile: { sweepIntervalMs: config.reconcileIntervalMs },
  mailTransport: mail,
  mailFrom: config.mailFrom,
  analytics: { flushIntervalMs: config.analyticsFlushIntervalMs, batchMax: config.analyticsBatchMax, playUrl: config.playUrl },
});
const server = await listen(createWorkerApp({ pool, redis, worker, logger }), config.port, config.host, logger);
logger.info(
  {
    port: config.port,
    redis: describeRedisTopology(config.redis),
    queueShards: config.queueShards,
    // Its address only: the credentials are never logged.
    deliveryProxy: config.deliveryProxy?.address ?? null,
    concurrency: config.deliveryConcurrency,
    endpointConcurrency: config.endpointConcurrency,
    retryDelays: config.retryDelays,
    disableAfterFailures: config.disableAfterFailures,
    analyticsFlushIntervalMs: config.analyticsFlushIntervalMs,
    analyticsBatchMax: config.analyticsBatchMax,
  },
  "delivery-worker running",
);

// Workers first (in-flight deliveries finish and are logged), then HTTP, Redis and the database.
registerShutdown(
  logger,
  [
    { name: "workers", run: () => worker.close() },
    { name: "http", run: () => closeServer(server) },
    { name: "smtp", run: async () => mail?.close() },
    { name: "redis", run: () => closeRedisConnection(redis) },
    { name: "tracing", run: () => tracing.shutdown() },
    { name: "database", run: () => pool.end() },
  ],
  30_000,
);
