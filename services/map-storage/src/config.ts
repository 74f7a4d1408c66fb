import { tmpdir } from "node:os";
import { DEFAULT_MAX_STORAGE_BYTES_PER_WORLD, MAX_STORAGE_BYTES_CEILING } from "@vw/contracts";
import { readDatabaseSettings } from "@vw/db/settings";
import { parseEnv, readAuthThrottle, readCommon, readPlayUrl, readRedisKeyPrefix, readRedisTopology, readTrustProxy, weakTokenProblem, type Env } from "@vw/service-kit";
import { ACTIVE_FILE_SANDBOXES, DEFAULT_ACTIVE_FILE_SANDBOX } from "./files/active-content.js";

/** map-storage configuration; the only reader of the environment. */
export function loadConfig(env: Env) {
  return parseEnv(env, (r) => {
    const common = readCommon(r, 3001);
    const adminToken = r.optionalString("ADMIN_TOKEN") ?? null;
    const maxUploadBytes = r.int("MAX_UPLOAD_BYTES", 500 * 1024 * 1024, { min: 1 });
    // The same strength check as admin-api's: it is the same operator token.
    const tokenProblem = adminToken === null ? null : weakTokenProblem("ADMIN_TOKEN", adminToken);
    if (tokenProblem !== null) r.problem(tokenProblem);
    return {
      ...common,
      // DATABASE_URL (a PgBouncer in transaction mode with ?pgbouncer=true), DIRECT_URL, DATABASE_POOL_MAX.
      database: readDatabaseSettings(r, { service: "map-storage", defaultPoolMax: 10 }),
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
      /** Largest JSON file the service parses (a `.wam` body or upload entry, a file to patch, a patch result), in decoded bytes. */
      maxJsonFileBytes: r.int("MAX_JSON_FILE_BYTES", 8 * 1024 * 1024, { min: 1024 }),
      /** Most operations in one JSON Patch. */
      maxPatchOperations: r.int("MAX_PATCH_OPERATIONS", 1000, { min: 1, max: 100_000 }),
      /** How long a reader may stop reading (no write completing) before its connection is cut. */
      sendTimeoutMs: r.int("SEND_TIMEOUT_MS", 60_000, { min: 100 }),
      /** Node's requestTimeout: the longest a request (headers and body: an upload's zip) may take to arrive. */
      requestTimeoutMs: r.int("REQUEST_TIMEOUT_MS", 600_000, { min: 1000 }),
      /** Bytes of files a world may store, unless the operator set its own (`quotas.maxStorageBytes`). */
      maxStorageBytesPerWorld: r.int("MAX_STORAGE_BYTES_PER_WORLD", DEFAULT_MAX_STORAGE_BYTES_PER_WORLD, { min: 1, max: MAX_STORAGE_BYTES_CEILING }),
      /** Uploads spooled, checked and published at once by this process; others wait (UPLOAD_LOCK_WAIT_MS). */
      maxConcurrentUploads: r.int("MAX_CONCURRENT_UPLOADS", 2, { min: 1, max: 64 }),
      apiKeyCacheTtlMs: r.int("API_KEY_CACHE_TTL_MS", 5_000, { min: 0, max: 60_000 }),
      fileCacheBytes: r.int("FILE_CACHE_BYTES", 128 * 1024 * 1024, { min: 0 }),
      writeLockWaitMs: r.int("WRITE_LOCK_WAIT_MS", 10_000, { min: 100 }),
      /** ACTIVE_FILE_SANDBOX: the CSP sandbox of files a browser could run (HTML, SVG, XML, PDF); see files/active-content.ts. */
      activeFileSandbox: r.oneOf("ACTIVE_FILE_SANDBOX", ACTIVE_FILE_SANDBOXES, DEFAULT_ACTIVE_FILE_SANDBOX),
      /** AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S: unknown API keys one client may send per window. */
      authThrottle: readAuthThrottle(r),
      /** TRUST_PROXY: whose X-Forwarded-For names the client (for throttling); nobody's by default. */
      trustProxy: readTrustProxy(r),
      /** Largest unpacked total of one `POST {base}/upload` (each file is also held to MAX_FILE_BYTES). */
      maxUploadBytes,
      /** Largest zip as sent: its entries' headers and central directory come on top of the content. */
      maxZipBytes: Math.ceil(maxUploadBytes * 1.1) + 1024 * 1024,
      /** How long an upload waits for the previous upload of its world to finish before 503. */
      uploadLockWaitMs: r.int("UPLOAD_LOCK_WAIT_MS", 120_000, { min: 100 }),
      /** Where an upload's zip is spooled while it is checked and published (deleted right after). */
      uploadTmpDir: r.string("UPLOAD_TMP_DIR", tmpdir()),
      /**
       * The operator's token (admin-api's ADMIN_TOKEN): also accepted by `GET {base}/rooms`, so
       * admin-api can list any world's rooms for its dashboard. Unset: only world API keys are.
       */
      adminToken,
    };
  });
}

export type MapStorageConfig = ReturnType<typeof loadConfig>;
