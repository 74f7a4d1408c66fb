import { createPrismaClient } from "@vw/db";
import { QUEUE_NAMES, createRedisConnection, openQueue } from "@vw/queues";
import { closeServer, createLogger, listen, loadConfigOrExit, registerShutdown } from "@vw/service-kit";
import { createIngestApp } from "./app.js";
import { loadConfig } from "./config.js";

const config = loadConfigOrExit("event-ingest", () => loadConfig(process.env));

const logger = createLogger("event-ingest", config.logLevel);
const prisma = createPrismaClient(config.databaseUrl);
const redis = createRedisConnection(config.redisUrl, "producer");
// Without a listener, an `error` event (Redis restarting) would crash the process; requests see the failure as a 503.
redis.on("error", (err: Error) => logger.warn({ err: err.message }, "redis connection error"));
const queue = openQueue(QUEUE_NAMES.deliveries, redis, config.redisKeyPrefix);
queue.on("error", (err: Error) => logger.warn({ err: err.message }, "deliveries queue error"));

const app = createIngestApp({
  prisma,
  redis,
  queue,
  logger,
  ingestToken: config.ingestToken,
  playUrl: config.playUrl,
  maxEventsPerRequest: config.maxEventsPerRequest,
});
const server = await listen(app, config.port);
logger.info(
  { port: config.port, playUrl: config.playUrl, redisKeyPrefix: config.redisKeyPrefix, maxEventsPerRequest: config.maxEventsPerRequest },
  "event-ingest listening",
);

registerShutdown(logger, [
  { name: "http", run: () => closeServer(server) },
  { name: "queue", run: () => queue.close() },
  { name: "redis", run: () => redis.quit() },
  { name: "database", run: () => prisma.$disconnect() },
]);
