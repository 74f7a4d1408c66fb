import { parseEnv, readCommon, readPlayUrl, readRedisKeyPrefix, readRedisTopology, type Env } from "@vw/service-kit";

/** map-storage configuration; the only reader of the environment. */
export function loadConfig(env: Env) {
  return parseEnv(env, (r) => {
    const common = readCommon(r, 3001);
    return {
      ...common,
      databaseUrl: r.url("DATABASE_URL", undefined, ["postgres:", "postgresql:"]),
      /** REDIS_URL, or REDIS_SENTINELS with REDIS_SENTINEL_MASTER, or REDIS_CLUSTER_NODES (see readRedisTopology). */
      redis: readRedisTopology(r),
      /** Prefix of every Redis key this service writes (locks, version markers). */
      redisKeyPrefix: readRedisKeyPrefix(r, "vw:map-storage:"),
      s3: {
        endpoint: r.optionalString("S3_ENDPOINT"),
        region: r.string("S3_REGION", "us-east-1"),
        bucket: r.string("S3_BUCKET"),
        accessKeyId: r.optionalString("S3_ACCESS_KEY_ID"),
        secretAccessKey: r.optionalString("S3_SECRET_ACCESS_KEY"),
        forcePathStyle: r.bool("S3_FORCE_PATH_STYLE", false),
        conditionalWrites: r.bool("S3_CONDITIONAL_WRITES", true),
      },
      publicBaseUrl: r.url("PUBLIC_MAP_STORAGE_URL", `http://localhost:${common.port}`),
      playUrl: readPlayUrl(r),
      maxFileBytes: r.int("MAX_FILE_BYTES", 50 * 1024 * 1024, { min: 1 }),
      apiKeyCacheTtlMs: r.int("API_KEY_CACHE_TTL_MS", 5_000, { min: 0, max: 60_000 }),
      fileCacheBytes: r.int("FILE_CACHE_BYTES", 128 * 1024 * 1024, { min: 0 }),
      writeLockWaitMs: r.int("WRITE_LOCK_WAIT_MS", 10_000, { min: 100 }),
    };
  });
}

export type MapStorageConfig = ReturnType<typeof loadConfig>;
