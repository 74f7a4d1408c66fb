/**
 * The worker process, from plain options: the owners of the tables it writes (built once over its
 * `pg` pool), and its parts, each started and closed by its own module: the deliveries
 * (deliveries.part.ts: the drains of every shard), the reconciler, and the workers of the other
 * queues (mails, retention, the analytics flush, recoveries). `main.ts` passes the configuration;
 * integration tests call it in-process with their own prefix, schedule and mail transport.
 */
import type { LookupFunction } from "node:net";
import type { Queue, Worker } from "bullmq";
import { DeliveryHistory, DeliveryLog, DeliveryRecoveries, EndpointStore, LogPartitions, pgRunner, type PgPool, type SqlRunner } from "@vw/db";
import { DEFAULT_QUEUE_SHARDS, QUEUE_NAMES, openQueue, type RedisClient } from "@vw/queues";
import { createServiceMetrics, redisClientErrorListener, type Logger, type ServiceMetrics } from "@vw/service-kit";
import type { DeliveryProxy, EndpointUrlPolicy, SecretBox } from "@vw/webhook-core";
import type { AnalyticsFlushDeps } from "./analytics-flush.js";
import { createAnalyticsWorker, scheduleAnalyticsFlush } from "./analytics.worker.js";
import { closeWithin } from "./bounded-close.js";
import { startDeliveries, type DeliveriesPart } from "./deliveries.part.js";
import { DependencyGate } from "./dependency-gate.js";
import { EndpointDisabledMailer, type MailTransport } from "./mailer.js";
import { createMaintenanceWorker, scheduleRetention } from "./maintenance.worker.js";
import { WorkerMetrics, backlogOf } from "./metrics.js";
import { createNotificationsWorker } from "./notifications.worker.js";
import { Reconciler } from "./reconciler.js";
import { createRecoveriesWorker } from "./recoveries.worker.js";

/** What the worker process is made of. */
export interface DeliveryWorkerOptions {
  /**
   * `createPgPool(DATABASE_URL)`: the process's one way to PostgreSQL (prepared statements), for the
   * delivery log, its history, the endpoint store, the recoveries and the disable mail's read
   * (docs/decisions/0012-one-database-path-per-process.md).
   */
  pool: PgPool;
  /** A worker-role connection (`createRedisConnection(config.redis, "worker")`); BullMQ duplicates it for blocking reads. */
  connection: RedisClient;
  keyPrefix: string;
  /** QUEUE_SHARDS: the deliveries queue's shards; this process serves them all. */
  queueShards?: number;
  logger: Logger;
  secretBox: SecretBox;
  endpointUrlPolicy: EndpointUrlPolicy;
  /** DELIVERY_PROXY_URL: deliveries (analytics batches included) leave through it; null or absent: directly. */
  deliveryProxy?: DeliveryProxy | null;
  deliveryTimeoutMs: number;
  retryDelays: readonly number[];
  disableAfterFailures: number;
  /** RETRY_AFTER_MAX_S in ms (default 6 h). */
  retryAfterMaxMs?: number;
  /** DRAIN_LINGER_MS: how long a drain out of work waits for more before its job ends (default 3 s). */
  drainLingerMs?: number;
  deliveryConcurrency: number;
  endpointConcurrency: number;
  retentionDays: number;
  /** PARTITIONS_AHEAD_DAYS: days of delivery-log partitions kept ready (also ensured at start-up). */
  partitionsAheadDays: number;
  retentionIntervalMs: number;
  /** JOB_LOCK_MS: how soon the jobs of a dead worker are taken over. */
  jobLockMs: number;
  mailTransport: MailTransport | null;
  mailFrom: string;
  random?: () => number;
  /** Wall clock of attempts (the `webhook-timestamp`); injectable for tests. */
  now?: () => Date;
  /** DNS lookup of deliveries' connections; the system's (`dns.lookup`) unless given. */
  deliveryLookup?: LookupFunction;
  /** The analytics flush schedule; without it this process runs no flush (tests that call `flushAnalytics` themselves). */
  analytics?: { flushIntervalMs: number; batchMax: number; playUrl: string };
  /** The process's metrics registry (`main.ts` creates it); a fresh one when absent. */
  serviceMetrics?: ServiceMetrics;
  /**
   * The reconciler (see reconciler.ts): RECONCILE_INTERVAL_MS between sweeps, and how often the
   * markers are checked. Every process runs one (one replica at a time is active); only tests that
   * share a database with other files' workers go without.
   */
  reconcile?: { sweepIntervalMs: number; checkIntervalMs?: number } | null;
}

/** Default DRAIN_LINGER_MS. */
export const DEFAULT_DRAIN_LINGER_MS = 3000;

/** Default RETRY_AFTER_MAX_S, in ms: 6 hours. */
export const DEFAULT_RETRY_AFTER_MAX_MS = 21_600_000;

/** The owners of the tables this process writes, built once over its `pg` pool. */
export interface WorkerDatabase {
  pool: PgPool;
  sql: SqlRunner;
  log: DeliveryLog;
  history: DeliveryHistory;
  endpoints: EndpointStore;
  recoveries: DeliveryRecoveries;
}

/** The running worker. */
export interface DeliveryWorker {
  /** What every part of this process reaches the delivery path's tables through. */
  db: WorkerDatabase;
  /** The process registry `/metrics` serves (HTTP and Node metrics included). */
  serviceMetrics: ServiceMetrics;
  /** The worker's own metrics, registered on `serviceMetrics.registry`. */
  metrics: WorkerMetrics;
  deliveries: DeliveriesPart;
  queues: Record<Exclude<keyof typeof QUEUE_NAMES, "deliveries">, Queue>;
  /** Every BullMQ worker of the process: one per delivery shard, and one per other queue. */
  workers: Worker[];
  /** The reconciler, when this process runs one. */
  reconciler: Reconciler | null;
  /** Closed while a dependency is down (this process takes no deliveries meanwhile). */
  gate: DependencyGate;
  /** Stops taking jobs, lets in-flight ones finish, closes queues and agents (not Redis or the pool). */
  close(): Promise<void>;
}

/** Starts the delivery, notification, maintenance and recovery workers (and the analytics one when scheduled). */
export async function startDeliveryWorker(options: DeliveryWorkerOptions): Promise<DeliveryWorker> {
  const { logger } = options;
  const serviceMetrics = options.serviceMetrics ?? createServiceMetrics("delivery-worker");
  const metrics = new WorkerMetrics(serviceMetrics.registry);
  const sql = pgRunner(options.pool);
  const db: WorkerDatabase = { pool: options.pool, sql, log: new DeliveryLog(sql), history: new DeliveryHistory(sql), endpoints: new EndpointStore(sql), recoveries: new DeliveryRecoveries(sql) };
  const queues = {
    notifications: openQueue(QUEUE_NAMES.notifications, options.connection, options.keyPrefix),
    maintenance: openQueue(QUEUE_NAMES.maintenance, options.connection, options.keyPrefix),
    analytics: openQueue(QUEUE_NAMES.analytics, options.connection, options.keyPrefix),
    recoveries: openQueue(QUEUE_NAMES.recoveries, options.connection, options.keyPrefix),
  };
  // BullMQ prints an unlistened queue error to stderr, once per reconnect attempt during an outage.
  for (const queue of Object.values(queues)) queue.on("error", redisClientErrorListener(logger, "queue error"));
  const gate = new DependencyGate({
    logger,
    probes: [
      { dependency: "postgresql", check: () => options.pool.query("SELECT 1") },
      { dependency: "redis", check: () => options.connection.ping() },
    ],
  });
  // Partitions ahead at start-up too, so a fresh replica never waits for the first scheduled run;
  // a failure is logged and left to that run (there are days of margin, and deliveries go on).
  await new LogPartitions(options.pool).ensureAhead(options.partitionsAheadDays).catch((err: unknown) => {
    logger.error({ err }, "delivery log: partitions ahead not ensured at start-up (the retention job retries)");
  });
  await scheduleRetention(queues.maintenance, options.retentionIntervalMs);
  const deliveries = await startDeliveries({
    ...options,
    queueShards: options.queueShards ?? DEFAULT_QUEUE_SHARDS,
    retryAfterMaxMs: options.retryAfterMaxMs ?? DEFAULT_RETRY_AFTER_MAX_MS,
    drainLingerMs: options.drainLingerMs ?? DEFAULT_DRAIN_LINGER_MS,
    log: db.log,
    endpoints: db.endpoints,
    notifications: queues.notifications,
    metrics,
    gate,
  });
  metrics.watchQueues([...deliveries.queues.shards, ...Object.values(queues)], async () => backlogOf(await db.log.dueEndpoints(), Date.now()));
  const mailer = new EndpointDisabledMailer(sql, options.mailTransport, options.mailFrom, logger);
  const workers = [
    ...deliveries.workers,
    createNotificationsWorker({ connection: options.connection, keyPrefix: options.keyPrefix, mailer, metrics, logger }),
    createMaintenanceWorker({
      connection: options.connection,
      keyPrefix: options.keyPrefix,
      pool: options.pool,
      retentionDays: options.retentionDays,
      partitionsAheadDays: options.partitionsAheadDays,
      metrics,
      logger,
    }),
    createRecoveriesWorker({ connection: options.connection, keyPrefix: options.keyPrefix, deps: { sql, log: db.log, history: db.history, signals: deliveries.signals, logger } }),
  ];
  if (options.analytics) {
    const flushDeps: AnalyticsFlushDeps = {
      redis: options.connection,
      sql,
      log: db.log,
      signals: deliveries.signals,
      keyPrefix: options.keyPrefix,
      playUrl: options.analytics.playUrl,
      batchMax: options.analytics.batchMax,
      logger,
      metrics,
    };
    await scheduleAnalyticsFlush(queues.analytics, options.analytics.flushIntervalMs);
    workers.push(createAnalyticsWorker({ keyPrefix: options.keyPrefix, deps: flushDeps }));
  }
  const reconciler = options.reconcile
    ? new Reconciler({
        log: db.log,
        queues: deliveries.queues,
        signals: deliveries.signals,
        timers: deliveries.timers,
        redis: options.connection,
        leaseKey: `${options.keyPrefix.replace(/:+$/, "")}:reconciler:lease`,
        sweepIntervalMs: options.reconcile.sweepIntervalMs,
        checkIntervalMs: options.reconcile.checkIntervalMs,
        logger,
        metrics,
      })
    : null;
  reconciler?.start();
  // The slowed-endpoints gauge counts windows used within the last minute: kept current between drains.
  const gaugeTimer = setInterval(() => deliveries.windows.refreshGauge(), 10_000);
  gaugeTimer.unref();
  return {
    db,
    serviceMetrics,
    metrics,
    deliveries,
    queues,
    workers,
    reconciler,
    gate,
    async close() {
      clearInterval(gaugeTimer);
      gate.stop();
      await reconciler?.stop();
      await deliveries.close();
      const boundMs = options.deliveryTimeoutMs + 5000;
      const others = workers.filter((w) => !deliveries.workers.includes(w));
      await Promise.all(others.map((w) => closeWithin(logger, w.close(), boundMs, `worker ${w.name}`)));
      await Promise.all(Object.values(queues).map((q) => closeWithin(logger, q.close(), 5000, `queue ${q.name}`)));
    },
  };
}
