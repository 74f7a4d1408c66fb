import { createPrismaClient } from "@vw/db";
import { closeServer, createLogger, listen, loadConfigOrExit, registerShutdown } from "@vw/service-kit";
import { createSecretBox } from "@vw/webhook-core";
import { createAdminApp } from "./app.js";
import { loadConfig } from "./config.js";

const config = loadConfigOrExit("admin-api", () => loadConfig(process.env));

const logger = createLogger("admin-api", config.logLevel);
const prisma = createPrismaClient(config.databaseUrl);

const app = createAdminApp({
  prisma,
  logger,
  adminToken: config.adminToken,
  publicMapStorageUrl: config.publicMapStorageUrl,
  playUrl: config.playUrl,
  // loadConfig has already built a box from these keys, so this cannot throw.
  secretBox: createSecretBox(config.secretsEncryptionKey),
  endpointUrlPolicy: config.endpointUrlPolicy,
});
const server = await listen(app, config.port);
logger.info(
  { port: config.port, publicMapStorageUrl: config.publicMapStorageUrl, playUrl: config.playUrl, endpointUrlPolicy: config.endpointUrlPolicy },
  "admin-api listening",
);

registerShutdown(logger, [
  { name: "http", run: () => closeServer(server) },
  { name: "database", run: () => prisma.$disconnect() },
]);
