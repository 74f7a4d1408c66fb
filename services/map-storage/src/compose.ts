import type { S3Client } from "@aws-sdk/client-s3";
import { ApiKeyStore, WorldDirectory, WorldStorageLedger, hashApiKey, prismaRunner, type PrismaClient } from "@vw/db";
import { ApiKeyAuthenticator, AuthThrottle, type Logger } from "@vw/service-kit";
import type { RedisClient } from "@vw/queues/redis-connection";
import type { MapStorageConfig } from "./config.js";
import { createMapStorageApp } from "./app.js";
import { FilesService } from "./files/files.service.js";
import { FileCache } from "./storage/file-cache.js";
import { FileLocks } from "./storage/redis-lock.js";
import { S3ObjectStore } from "./storage/s3-object-store.js";
import { StorageUsage } from "./storage/storage-usage.js";
import type { ObjectStore } from "./storage/object-store.js";
import { RoomsService } from "./uploads/rooms.service.js";
import { UploadService } from "./uploads/upload.service.js";
import { UploadSlots } from "./uploads/upload-slots.js";
import { WorldCache } from "./uploads/world-directory.js";

/** Most files one upload may publish: each is an S3 write, so a zip of a million empty entries is refused. */
const MAX_UPLOAD_FILES = 20_000;

export interface MapStorageClients {
  prisma: PrismaClient;
  redis: RedisClient;
  s3: S3Client;
  logger: Logger;
}

/** Replacements tests inject: a store that counts calls, a clock for key-cache expiry. */
export interface MapStorageOverrides {
  wrapStore?: (store: ObjectStore) => ObjectStore;
  now?: () => number;
}

/** Builds the app from config and live clients; shared by `main.ts` and the tests. */
export function composeMapStorage(config: MapStorageConfig, clients: MapStorageClients, overrides: MapStorageOverrides = {}) {
  const s3Store = new S3ObjectStore(clients.s3, config.s3.bucket);
  const store = overrides.wrapStore ? overrides.wrapStore(s3Store) : s3Store;
  // Files up to this size are read whole (and may be cached); larger ones stream to the client.
  const cacheEntryMax = Math.max(1, Math.min(config.fileCacheBytes, 8 * 1024 * 1024));
  const cache = new FileCache(clients.redis, config.redisKeyPrefix, {
    maxBytes: Math.max(config.fileCacheBytes, 1),
    maxEntryBytes: cacheEntryMax,
    versionTtlSeconds: 24 * 3600,
  });
  const locks = new FileLocks(clients.redis, config.redisKeyPrefix, { leaseMs: 30_000, waitMs: config.writeLockWaitMs });
  // Every write is counted against the world's storage quota (bytes in use kept in PostgreSQL).
  const storage = new StorageUsage(new WorldStorageLedger(clients.prisma), store, locks, config.maxStorageBytesPerWorld, clients.logger);
  const files = new FilesService(store, cache, locks, {
    maxFileBytes: config.maxFileBytes,
    maxJsonFileBytes: config.maxJsonFileBytes,
    conditionalWrites: config.s3.conditionalWrites,
    maxConflictRetries: 5,
    maxPatchGroup: 100,
    streamAboveBytes: cacheEntryMax,
  }, storage);
  const auth = new ApiKeyAuthenticator(
    new ApiKeyStore(clients.prisma),
    {
      realm: "map-storage",
      cacheTtlMs: config.apiKeyCacheTtlMs,
      touchEveryMs: 60_000,
      hash: hashApiKey,
      // Unknown keys are counted per client in Redis, so every replica refuses a guesser.
      throttle: new AuthThrottle({ redis: clients.redis, keyPrefix: config.redisKeyPrefix, scope: "api-key", ...config.authThrottle, logger: clients.logger }),
      ...(overrides.now ? { now: overrides.now } : {}),
    },
    clients.logger,
  );
  const uploads = new UploadService(files, store, locks, {
    maxFileBytes: config.maxFileBytes,
    maxJsonFileBytes: config.maxJsonFileBytes,
    maxUploadBytes: config.maxUploadBytes,
    maxEntries: MAX_UPLOAD_FILES,
    lockWaitMs: config.uploadLockWaitMs,
    concurrency: 16,
  }, storage);
  const app = createMapStorageApp({
    files,
    tools: {
      uploads,
      rooms: new RoomsService(store, files, files.maxJsonBytes),
      store,
      worlds: new WorldCache(new WorldDirectory(prismaRunner(clients.prisma)), config.apiKeyCacheTtlMs),
      maxZipBytes: config.maxZipBytes,
      uploadTmpDir: config.uploadTmpDir,
      adminToken: config.adminToken,
      uploadSlots: new UploadSlots(config.maxConcurrentUploads, config.uploadLockWaitMs),
    },
    auth,
    logger: clients.logger,
    maxFileBytes: config.maxFileBytes,
    maxPatchOperations: config.maxPatchOperations,
    sendTimeoutMs: config.sendTimeoutMs,
    publicBaseUrl: config.publicBaseUrl,
    playUrl: config.playUrl,
    activeFileSandbox: config.activeFileSandbox,
    trustProxy: config.trustProxy,
    readiness: [
      { name: "s3", check: () => store.ping() },
      { name: "database", dependency: "postgresql", check: () => clients.prisma.$queryRaw`SELECT 1` },
      { name: "redis", check: () => clients.redis.ping() },
    ],
  });
  return { app, files, auth, store, uploads, storage };
}
