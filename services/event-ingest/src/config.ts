import { DEFAULT_ANALYTICS_BUFFER_MAX, DEFAULT_ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD, DEFAULT_ANALYTICS_BUFFER_MAX_PER_WORLD } from "@vw/queues";
import { readQueueShards } from "@vw/queues";
import { readDatabaseSettings } from "@vw/db/settings";
import { parseEnv, readAuthThrottle, readCommon, readPlayUrl, readRedisKeyPrefix, readRedisTopology, readTrustProxy, weakTokenProblem, type Env } from "@vw/service-kit";
import { DEFAULT_ENDPOINT_URL_POLICY, readDeliveryProxyUrl, secretBoxKeyProblem, type EndpointUrlPolicy } from "@vw/webhook-core";

/** Default of DATABASE_POOL_MAX: the event intake runs one transaction at a time (group commit), so most of these serve the auth hook's and the member intake's reads while it runs (README, Operations). */
export const DEFAULT_DATABASE_POOL_MAX = 10;

/** Default and ceiling of MAX_EVENTS_PER_REQUEST. */
export const DEFAULT_MAX_EVENTS_PER_REQUEST = 500;
export const MAX_EVENTS_PER_REQUEST_CEILING = 10_000;

/** Default of AUTH_HOOK_TIMEOUT_MS: the spec's 5-second answer time of `member.connecting`. */
export const DEFAULT_AUTH_HOOK_TIMEOUT_MS = 5_000;

/** Values of `ENDPOINT_URL_POLICY`. */
const ENDPOINT_URL_POLICIES: readonly EndpointUrlPolicy[] = ["public-https", "any"];

/** Default of ANALYTICS_EVENT_MAX_BYTES: one inner analytics event, serialized. */
export const DEFAULT_ANALYTICS_EVENT_MAX_BYTES = 16 * 1024;

/** Shortest accepted ANALYTICS_PSEUDONYM_KEY (a 32-byte HMAC key is 32 characters or more). */
export const MIN_PSEUDONYM_KEY_LENGTH = 32;

/**
 * event-ingest configuration; the only reader of the environment. Throws a `ConfigError` naming
 * every missing or malformed variable (never echoing the token).
 */
export function loadConfig(env: Env) {
  return parseEnv(env, (r) => {
    const common = readCommon(r, 3002);
    const ingestToken = r.string("INGEST_TOKEN");
    const tokenProblem = weakTokenProblem("INGEST_TOKEN", ingestToken);
    if (tokenProblem !== null) r.problem(tokenProblem);
    const redisKeyPrefix = readRedisKeyPrefix(r, "vw");
    // Same rule as admin-api's: the auth hook signs with endpoint secrets that admin-api sealed.
    const secretsEncryptionKey = r.string("SECRETS_ENCRYPTION_KEY");
    const keyProblem = secretsEncryptionKey === "" ? null : secretBoxKeyProblem(secretsEncryptionKey);
    if (keyProblem !== null) r.problem(`SECRETS_ENCRYPTION_KEY: ${keyProblem}`);
    const deliveryProxy = readDeliveryProxyUrl(r.optionalString("DELIVERY_PROXY_URL"));
    if (deliveryProxy.problem !== null) r.problem(deliveryProxy.problem);
    const analyticsPseudonymKey = r.optionalString("ANALYTICS_PSEUDONYM_KEY") ?? null;
    if (analyticsPseudonymKey !== null && analyticsPseudonymKey.length < MIN_PSEUDONYM_KEY_LENGTH) {
      r.problem(`ANALYTICS_PSEUDONYM_KEY must be at least ${MIN_PSEUDONYM_KEY_LENGTH} characters long, got ${analyticsPseudonymKey.length}`);
    }
    return {
      ...common,
      /**
       * DATABASE_URL (possibly a transaction-pooling PgBouncer, `?pgbouncer=true`), DIRECT_URL
       * (PostgreSQL itself: migrations, and the auth hook's LISTEN), DATABASE_POOL_MAX: every connection of
       * this process to DATABASE_URL, all together; application_name "event-ingest".
       */
      database: readDatabaseSettings(r, { service: "event-ingest", defaultPoolMax: DEFAULT_DATABASE_POOL_MAX }),
      /** REDIS_URL (`redis://host:6379/3` selects database 3), or Sentinel, or Cluster: see readRedisTopology. */
      redis: readRedisTopology(r),
      /** Prefix of every Redis key (BullMQ keys are `<prefix>:bull:<queue>:...`, trailing colons dropped); the worker's must match. */
      redisKeyPrefix,
      /** QUEUE_SHARDS: the deliveries queue's shards; producers and workers must agree (see readQueueShards). */
      queueShards: readQueueShards(r),
      /** Bearer token of every `/v1` request. */
      ingestToken,
      /**
       * Public address of the play client; a world's `url` in the envelope is `<this>/@/<org>/<world>`
       * (or its custom domain). Same default as admin-api's, a local-only name.
       */
      playUrl: readPlayUrl(r),
      /** Most events in one `{events: [...]}` request. */
      maxEventsPerRequest: r.int("MAX_EVENTS_PER_REQUEST", DEFAULT_MAX_EVENTS_PER_REQUEST, { min: 1, max: MAX_EVENTS_PER_REQUEST_CEILING }),
      /** Budget of the auth hook's answer, all endpoints together (and of each call made after it). */
      authHookTimeoutMs: r.int("AUTH_HOOK_TIMEOUT_MS", DEFAULT_AUTH_HOOK_TIMEOUT_MS, { min: 1, max: 60_000 }),
      /**
       * `public-https` (default): the auth hook connects only to public addresses over https.
       * `any`: every http(s) URL, for development and tests only (logged loudly at start-up).
       */
      endpointUrlPolicy: r.oneOf("ENDPOINT_URL_POLICY", ENDPOINT_URL_POLICIES, DEFAULT_ENDPOINT_URL_POLICY),
      /**
       * DELIVERY_PROXY_URL: the forward proxy the auth hook's calls go through, as every request to a customer does (asked for
       * the address this process resolved and vetted); null: requests leave directly.
       */
      deliveryProxy: deliveryProxy.proxy,
      /** Keys of the secret box that opens endpoint secrets (admin-api's SECRETS_ENCRYPTION_KEY). */
      secretsEncryptionKey,
      /** HMAC key of analytics pseudonyms; null = derived from SECRETS_ENCRYPTION_KEY (see analytics-privacy.ts). */
      analyticsPseudonymKey,
      /** Inner analytics events waiting per endpoint at most; older ones are trimmed and counted. */
      analyticsBufferMax: r.int("ANALYTICS_BUFFER_MAX", DEFAULT_ANALYTICS_BUFFER_MAX, { min: 1, max: 100_000 }),
      /** Inner analytics events held in Redis for one world, its endpoints together, unless the world has its own limit; more are not buffered and counted. */
      analyticsBufferMaxPerWorld: r.int("ANALYTICS_BUFFER_MAX_PER_WORLD", DEFAULT_ANALYTICS_BUFFER_MAX_PER_WORLD, { min: 1, max: 10_000_000 }),
      /** Largest inner analytics event (its JSON, in bytes); a request holding a larger one is refused with 413. */
      analyticsEventMaxBytes: r.int("ANALYTICS_EVENT_MAX_BYTES", DEFAULT_ANALYTICS_EVENT_MAX_BYTES, { min: 256, max: 1024 * 1024 }),
      /** Bytes of analytics events held in Redis for one world, its endpoints' copies together; more are not buffered and counted. */
      analyticsBufferMaxBytesPerWorld: r.int("ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD", DEFAULT_ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD, { min: 64 * 1024, max: 1024 * 1024 * 1024 }),
      /** AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S: wrong ingest tokens one client may send per window. */
      authThrottle: readAuthThrottle(r),
      /** TRUST_PROXY: whose X-Forwarded-For names the client (for throttling); nobody's by default. */
      trustProxy: readTrustProxy(r),
    };
  });
}

export type IngestConfig = ReturnType<typeof loadConfig>;
