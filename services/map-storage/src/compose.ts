import type { S3Client } from "@aws-sdk/client-s3";
import { PrismaApiKeyLookup, hashApiKey, type PrismaClient } from "@vw/db";
import { ApiKeyAuthenticator, type Logger } from "@vw/service-kit";
import type { RedisClient } from "@vw/queues/redis-connection";
import type { MapStorageConfig } from "./config.js";
import { createMapStorageApp } from "./app.js";
import { FilesService } from "./files/files.service.js";
import { FileCache } from "./storage/file-cache.js";
import { FileLocks } from "./storage/redis-lock.js";
import { S3ObjectStore } from "./storage/s3-object-store.js";
import type { ObjectStore } from "./storage/object-store.js";

export interface MapStorageClients {
  prisma: PrismaClient;
  redis: RedisClient;
  s3: S3Client;
  logger: Logger;
}

/** Builds the app from config and live clients; shared by `main.ts`, the tests and the benchmark. */
/** Replacements tests inject: a store that counts calls, a clock for key-cache expiry. */
export interface MapStorageOverrides {
  wrapStore?: (store: ObjectStore) => ObjectStore;
  now?: () => number;
}

export function composeMapStorage(config: MapStorageConfig, clients: MapStorageClients, overrides: MapStorageOverrides = {}) {
  const s3Store = new S3ObjectStore(clients.s3, config.s3.bucket);
  const store = overrides.wrapStore ? overrides.wrapStore(s3Store) : s3Store;
  const cache = new FileCache(clients.redis, config.redisKeyPrefix, {
    maxBytes: Math.max(config.fileCacheBytes, 1),
    maxEntryBytes: Math.max(1, Math.min(config.fileCacheBytes, 8 * 1024 * 1024)),
    versionTtlSeconds: 24 * 3600,
  });
  const locks = new FileLocks(clients.redis, config.redisKeyPrefix, { leaseMs: 30_000, waitMs: config.writeLockWaitMs });
  const files = new FilesService(store, cache, locks, {
    maxFileBytes: config.maxFileBytes,
    conditionalWrites: config.s3.conditionalWrites,
    maxConflictRetries: 5,
    maxPatchGroup: 100,
  });
  const auth = new ApiKeyAuthenticator(
    new PrismaApiKeyLookup(clients.prisma),
    { realm: "map-storage", cacheTtlMs: config.apiKeyCacheTtlMs, touchEveryMs: 60_000, hash: hashApiKey, ...(overrides.now ? { now: overrides.now } : {}) },
    clients.logger,
  );
  const app = createMapStorageApp({
    files,
    auth,
    logger: clients.logger,
    maxFileBytes: config.maxFileBytes,
    publicBaseUrl: config.publicBaseUrl,
    playUrl: config.playUrl,
    readiness: [
      { name: "s3", check: () => store.ping() },
      { name: "database", dependency: "postgresql", check: () => clients.prisma.$queryRaw`SELECT 1` },
      { name: "redis", check: () => clients.redis.ping() },
    ],
  });
  return { app, files, auth, store };
}
