/**
 * Database access of the platform: the Prisma client factory, the generated client and model
 * types, Prisma error helpers, and the one owner of each table the services share: the delivery
 * log (delivery-log/), the endpoint store (endpoints/), the API key store, the member directory
 * and the delivery recoveries, the world storage ledger; the world directory (worlds by their slugs, for every service). The schema and migrations live in
 * ../prisma/.
 */
export {
  createPrismaClient,
  createPrismaClientOnPool,
  createPgClient,
  withPooledClient,
  createPgPool,
  pingDatabase,
  type PgClient,
  type PgNotification,
  type PgPool,
  type PgPoolOptions,
  type PrismaClientOptions,
  type DatabaseTarget,
} from "./client.js";
export { readDatabaseSettings, type DatabaseSettings, type DatabaseSettingsOptions, type DatabaseEnvReader } from "./database-settings.js";
export { generateApiKey, hashApiKey, API_KEY_PREFIX, API_KEY_DISPLAY_PREFIX_LENGTH, type GeneratedApiKey } from "./api-keys.js";
export { ApiKeyStore, type ApiKeyPrincipal } from "./api-key-store.js";
export {
  EndpointStore,
  type EndpointDisableReason,
  type EndpointKey,
  type EndpointPatch,
  type EndpointRecord,
  type NewEndpoint,
  type QuotaCheck,
  type SealedHeaders,
  type WorldEndpointCounts,
} from "./endpoints/endpoint-store.js";
export { WorldDirectory, worldsBySlugs, worldBySlugsSql, type WorldEntry, type WorldSummary } from "./world-directory.js";
export { WorldStorageLedger, type StorageReservation, type WorldSlugs } from "./world-storage.js";
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
export { DeliveryRecoveries, recoveryCursor, type DeliveryRecovery, type RecoveryState } from "./delivery-recoveries.js";
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
  EndpointStats,
  WorldStorageUsage,
} from "./generated/prisma/client.js";
