/**
 * Database access of the platform: the Prisma client factory, the generated client and model
 * types, Prisma error helpers, and the API-key hashing shared by admin-api (issues keys) and
 * map-storage (checks them). The schema and migrations live in ../prisma/.
 */
export {
  createPrismaClient,
  createPgClient,
  createPgPool,
  pingDatabase,
  type PgClient,
  type PgNotification,
  type PgPool,
  type PgPoolOptions,
  type PrismaClientOptions,
} from "./client.js";
export { generateApiKey, hashApiKey, API_KEY_PREFIX, API_KEY_DISPLAY_PREFIX_LENGTH, type GeneratedApiKey } from "./api-keys.js";
export { uniqueViolationFields, isRecordNotFound } from "./errors.js";
export * from "./delivery-log/index.js";
export {
  requeueDeliveries,
  restoreDeliveries,
  countDeliveriesInWindow,
  deliveriesInWindowPage,
  type RequeuedDelivery,
  type CreationWindow,
  type WindowCursor,
} from "./delivery-requeue.js";
export { DeliveryRecoveries, recoveryCursor, type RecoveryState } from "./delivery-recoveries.js";
export { PrismaClient, Prisma } from "./generated/prisma/client.js";
export type {
  Organization,
  World,
  ApiKey,
  WebhookEndpoint,
  WebhookEvent,
  WebhookDelivery,
  DeliveryAttempt,
  DashboardSession,
  DeliveryRecovery,
  EndpointStats,
} from "./generated/prisma/client.js";
