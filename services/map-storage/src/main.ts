import { createPrismaClient } from "@vw/db";
import { closeRedisConnection, createRedisConnection } from "@vw/queues/redis-connection";
import { closeServer, createLogger, describeRedisTopology, listen, loadConfigOrExit, logProcessWarnings, registerShutdown, watchRedisConnection, startTracing } from "@vw/service-kit";
import { loadConfig } from "./config.js";
import { composeMapStorage } from "./compose.js";
import { createS3Client } from "./storage/s3-object-store.js";

const config = loadConfigOrExit("map-storage", () => loadConfig(process.env));

const logger = createLogger("map-storage", config.logLevel, config.logFormat);
// Before any client is built: Node's plain-text warnings would break the JSON log stream.
logProcessWarnings(logger);
// OTEL_* variables: spans over OTLP, or nothing at all (no SDK loaded) when no endpoint is set.
const tracing = await startTracing(config.tracing, "map-storage", logger);
const prisma = createPrismaClient(config.database, { max: config.database.poolMax });
// A producer connection: requests fail fast when Redis is down (answered 503) instead of queueing behind a reconnect.
const redis = createRedisConnection(config.redis, "producer");
watchRedisConnection(redis, logger);
const s3 = createS3Client(config.s3);

const { app, storage } = composeMapStorage(config, { prisma, redis, s3, logger });
// Uploads are the largest bodies: REQUEST_TIMEOUT_MS is what a zip of MAX_UPLOAD_BYTES may take to arrive.
const server = await listen(app, config.port, config.host, logger, { requestTimeoutMs: config.requestTimeoutMs });
logger.info({ port: config.port, bucket: config.s3.bucket, publicBaseUrl: config.publicBaseUrl, redis: describeRedisTopology(config.redis) }, "map-storage listening");

// Worlds that predate the storage count are counted once, in the background, so that their bytes
// in use show before anyone writes to them (a write counts its world first anyway).
void storage.countUncounted().then(
  (counted) => counted > 0 && logger.info({ worlds: counted }, "storage count: worlds counted"),
  (err: unknown) => logger.warn({ err }, "storage count: counting worlds failed; each is counted at its next write"),
);

registerShutdown(logger, [
  { name: "http", run: () => closeServer(server) },
  { name: "redis", run: () => closeRedisConnection(redis) },
  { name: "database", run: () => prisma.$disconnect() },
  { name: "s3", run: async () => s3.destroy() },
  { name: "tracing", run: () => tracing.shutdown() },
]);
