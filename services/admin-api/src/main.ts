import { createPrismaClient } from "@vw/db";
import { closeServer, ConfigError, createLogger, listen, registerShutdown } from "@vw/service-kit";
import { createAdminApp } from "./app.js";
import { loadConfig } from "./config.js";

let config;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`admin-api: ${err.message}\n`);
    process.exit(1);
  }
  throw err;
}

const logger = createLogger("admin-api", config.logLevel);
const prisma = createPrismaClient(config.databaseUrl);

const app = createAdminApp({
  prisma,
  logger,
  adminToken: config.adminToken,
  publicMapStorageUrl: config.publicMapStorageUrl,
  playUrl: config.playUrl,
});
const server = await listen(app, config.port);
logger.info({ port: config.port, publicMapStorageUrl: config.publicMapStorageUrl, playUrl: config.playUrl }, "admin-api listening");

registerShutdown(logger, [
  { name: "http", run: () => closeServer(server) },
  { name: "database", run: () => prisma.$disconnect() },
]);
