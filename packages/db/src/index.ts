/**
 * Database access of the platform: the Prisma client factory, the generated client and model
 * types, Prisma error helpers, the API-key hashing and lookup shared by admin-api (issues keys,
 * checks them on the Inbound API) and map-storage (checks them), the world lookup of map-storage, and the member directory (the
 * one writer of the member tables). The schema and migrations live in ../prisma/.
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
export { PrismaApiKeyLookup, type ApiKeyPrincipal } from "./api-key-lookup.js";
export { PrismaWorldLookup, type WorldSummary } from "./world-lookup.js";
export {
  MemberDirectory,
  MEMBER_TYPES,
  MEMBER_UUID_MAX_LENGTH,
  memberUuidProblem,
  withoutRowData,
  type ConsentAnswer,
  type MemberEvent,
  type MemberProfile,
  type MemberRecord,
  type MemberType,
} from "./member-directory.js";
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
