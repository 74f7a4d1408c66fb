import { readQueueShards } from "@vw/queues";
import { readDatabaseSettings } from "@vw/db/settings";
import { parseEnv, readCommon, readPlayUrl, readRedisKeyPrefix, readRedisTopology, type Env } from "@vw/service-kit";
import { DEFAULT_ANALYTICS_BATCH_MAX, DEFAULT_ANALYTICS_FLUSH_INTERVAL_MS } from "./analytics-flush.js";
import {
  DEFAULT_ENDPOINT_URL_POLICY,
  DEFAULT_RETRY_DELAYS_TEXT,
  RetryScheduleError,
  secretBoxKeyProblem,
  parseRetryDelays,
  readDeliveryProxyUrl,
  type EndpointUrlPolicy,
} from "@vw/webhook-core";

/** The spec's ceiling: "up to 9 more attempts". */
export const MAX_RETRIES = 9;

const ENDPOINT_URL_POLICIES: readonly EndpointUrlPolicy[] = ["public-https", "any"];

/** Longest ANALYTICS_FLUSH_INTERVAL_MS: an hour. Anything longer is a typo (analytics would stall). */
export const MAX_ANALYTICS_FLUSH_INTERVAL_MS = 3_600_000;

/**
 * delivery-worker configuration; the only reader of the environment. Throws a `ConfigError`
 * naming every missing or malformed variable (never echoing secrets).
 */
export function loadConfig(env: Env) {
  return parseEnv(env, (r) => {
    const common = readCommon(r, 3004);
    const secretsEncryptionKey = r.string("SECRETS_ENCRYPTION_KEY");
    const keyProblem = secretsEncryptionKey === "" ? null : secretBoxKeyProblem(secretsEncryptionKey);
    if (keyProblem !== null) r.problem(`SECRETS_ENCRYPTION_KEY: ${keyProblem}`);
    const retryDelaysText = r.string("RETRY_DELAYS", DEFAULT_RETRY_DELAYS_TEXT);
    let retryDelays: readonly number[] = [];
    try {
      retryDelays = parseRetryDelays(retryDelaysText);
    } catch (err) {
      if (!(err instanceof RetryScheduleError)) throw err;
      r.problem(`RETRY_DELAYS: ${err.message}`);
    }
    if (retryDelays.length > MAX_RETRIES) {
      r.problem(`RETRY_DELAYS lists ${retryDelays.length} delays; at most ${MAX_RETRIES} retries are allowed (spec: Limits)`);
    }
    const playUrl = readPlayUrl(r);
    const deliveryProxy = readDeliveryProxyUrl(r.optionalString("DELIVERY_PROXY_URL"));
    if (deliveryProxy.problem !== null) r.problem(deliveryProxy.problem);
    const smtpUrl = r.optionalString("SMTP_URL");
    if (smtpUrl !== undefined) r.url("SMTP_URL", undefined, ["smtp:", "smtps:"]);
    return {
      ...common,
      // DATABASE_URL (a PgBouncer in transaction mode with ?pgbouncer=true), DIRECT_URL, DATABASE_POOL_MAX.
      database: readDatabaseSettings(r, { service: "delivery-worker", defaultPoolMax: 8 }),
      /** REDIS_URL, or REDIS_SENTINELS with REDIS_SENTINEL_MASTER, or REDIS_CLUSTER_NODES (see readRedisTopology). */
      redis: readRedisTopology(r),
      /** Prefix of every Redis key (BullMQ keys are `<prefix>:bull:<queue>:...`). */
      redisKeyPrefix: readRedisKeyPrefix(r, "vw"),
      /** QUEUE_SHARDS: the deliveries queue's shards; producers and workers must agree (see readQueueShards). */
      queueShards: readQueueShards(r),
      /** Same keys as admin-api: the worker opens endpoint secrets to sign with them. */
      secretsEncryptionKey,
      endpointUrlPolicy: r.oneOf("ENDPOINT_URL_POLICY", ENDPOINT_URL_POLICIES, DEFAULT_ENDPOINT_URL_POLICY),
      /**
       * DELIVERY_PROXY_URL: the forward proxy every request to a customer goes through (asked for
       * the address this process resolved and vetted); null: requests leave directly.
       */
      deliveryProxy: deliveryProxy.proxy,
      /** Whole-attempt budget of one delivery POST. */
      deliveryTimeoutMs: r.int("DELIVERY_TIMEOUT_MS", 15_000, { min: 100, max: 120_000 }),
      /** Delay before each retry (up to 9 retries); each delay gets up to +10% jitter. */
      retryDelays,
      /** Consecutive failed attempts (ordinary deliveries) that disable an endpoint. */
      disableAfterFailures: r.int("DISABLE_AFTER_FAILURES", 50, { min: 1 }),
      /** Age after which deliveries, their attempts and deduplication records are dropped (whole days: up to one day more). */
      deliveryRetentionDays: r.int("DELIVERY_RETENTION_DAYS", 90, { min: 1 }),
      /** Days of daily delivery-log partitions created ahead of today (at least a week of margin). */
      partitionsAheadDays: r.int("PARTITIONS_AHEAD_DAYS", 7, { min: 7, max: 366 }),
      /** How often the retention job runs. */
      retentionIntervalMs: r.int("RETENTION_INTERVAL_MS", 3_600_000, { min: 1000 }),
      /** Deliveries in flight per worker process, across all endpoints: from the start of a POST until its attempt is logged (what a crash can send twice). */
      deliveryConcurrency: r.int("DELIVERY_CONCURRENCY", 400, { min: 1, max: 2000 }),
      /** Largest window of attempts in flight per endpoint (one drain at a time sends to an endpoint, whatever the replicas). */
      endpointConcurrency: r.int("DELIVERY_ENDPOINT_CONCURRENCY", 10, { min: 1, max: 1000 }),
      /**
       * How long an endpoint's drain that ran out of work waits for more before its job ends: an
       * endpoint getting events every second or so keeps one drain instead of a job per event.
       */
      drainLingerMs: r.int("DRAIN_LINGER_MS", 3000, { min: 0, max: 60_000 }),
      /** RETRY_AFTER_MAX_S in ms: the longest a receiver's Retry-After (429, 503) may push a retry past the schedule. */
      retryAfterMaxMs: r.int("RETRY_AFTER_MAX_S", 21_600, { min: 0, max: 7 * 86_400 }) * 1000,
      /**
       * Lock of an active job; a worker that dies holding one (kill -9, a crashed node) has its
       * jobs handed to another worker within about this long (BullMQ lockDuration and
       * stalledInterval). Too short and a long delivery could be sent twice; keep it above
       * DELIVERY_TIMEOUT_MS.
       */
      jobLockMs: r.int("JOB_LOCK_MS", 30_000, { min: 1000 }),
      /**
       * How often the reconciler wakes every endpoint with due deliveries in PostgreSQL (the schedule
       * of record) that has no drain in Redis: the longest a delivery can wait without one. A Redis
       * that lost its data is noticed within a second, whatever this is.
       */
      reconcileIntervalMs: r.int("RECONCILE_INTERVAL_MS", 30_000, { min: 1000, max: 3_600_000 }),
      /** SMTP relay for administrator mails; unset = mails are logged, not sent (loud warning). */
      smtpUrl: smtpUrl ?? null,
      mailFrom: r.string("MAIL_FROM", "Webhooks <webhooks@localhost>"),
      /** Public address of the play client, for the world's `url` in `analytics.batch` envelopes (event-ingest's must match). */
      playUrl,
      /** One analytics flush per interval: each endpoint gets at most 60000 / this batches a minute (3 by default). */
      analyticsFlushIntervalMs: r.int("ANALYTICS_FLUSH_INTERVAL_MS", DEFAULT_ANALYTICS_FLUSH_INTERVAL_MS, { min: 1000, max: MAX_ANALYTICS_FLUSH_INTERVAL_MS }),
      /** Inner events per `analytics.batch` (the spec's ceiling is 100). */
      analyticsBatchMax: r.int("ANALYTICS_BATCH_MAX", DEFAULT_ANALYTICS_BATCH_MAX, { min: 1, max: DEFAULT_ANALYTICS_BATCH_MAX }),
    };
  });
}

export type WorkerConfig = ReturnType<typeof loadConfig>;
