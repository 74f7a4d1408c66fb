/**
 * The worker process, from plain options: the owners of the tables it writes (built once over its
 * `pg` pool), then its parts (part.ts), each started and closed by its own module, in this order:
 *
 * 1. the shard layout of the deliveries queue and its drain signals (shards.part.ts);
 * 2. the other queues' parts: mail (notifications.part.ts), retention (maintenance.part.ts),
 *    recoveries (recoveries.part.ts), the analytics flush (analytics.part.ts), closed together
 *    (none uses another);
 * 3. the deliveries: a drain worker per shard, the dependency gate (deliveries.part.ts);
 * 4. the reconciler's sweeps (reconciler.part.ts);
 * 5. the metrics read at each scrape and the gauge timer (metrics.part.ts).
 *
 * Closing goes the other way: the sweeps stop, the drains end their attempts, the other queues'
 * jobs in flight end, and the shard queues everyone woke through close last. `main.ts` passes the
 * configuration; integration tests call it in-process with their own prefix, schedule and mail
 * transport.
 */
import type { LookupFunction } from "node:net";
import type { Queue, Worker } from "bullmq";
import { DeliveryHistory, DeliveryLog, DeliveryRecoveries, EndpointStore, pgRunner, type PgPool, type SqlRunner } from "@vw/db";
import { DEFAULT_QUEUE_SHARDS, type QUEUE_NAMES, type RedisClient } from "@vw/queues";
import { createServiceMetrics, type Logger, type ServiceMetrics } from "@vw/service-kit";
import type { DeliveryProxy, EndpointUrlPolicy, SecretBox } from "@vw/webhook-core";
import { startAnalytics } from "./analytics.part.js";
import { startDeliveries, type DeliveriesPart } from "./deliveries.part.js";
import type { DependencyGate } from "./dependency-gate.js";
import { startMaintenance } from "./maintenance.part.js";
import type { MailTransport } from "./mailer.js";
import { startMetricsWatch } from "./metrics.part.js";
import { WorkerMetrics } from "./metrics.js";
import { startNotifications } from "./notifications.part.js";
import { Parts } from "./part.js";
import type { Reconciler } from "./reconciler.js";
import { startReconciler } from "./reconciler.part.js";
import { startRecoveries } from "./recoveries.part.js";
import { startShards } from "./shards.part.js";

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
  /** Closes the parts in reverse order: in-flight jobs finish, queues and agents close (not Redis or the pool). */
  close(): Promise<void>;
}

/** The owners of the tables the process writes, each built once over its pool. */
export function openWorkerDatabase(pool: PgPool): WorkerDatabase {
  const sql = pgRunner(pool);
  const log = new DeliveryLog(sql);
  return { pool, sql, log, history: new DeliveryHistory(sql), endpoints: new EndpointStore(sql, log), recoveries: new DeliveryRecoveries(sql) };
}

/** Starts the worker's parts (see the file comment); if one fails to start, those started are closed. */
export async function startDeliveryWorker(options: DeliveryWorkerOptions): Promise<DeliveryWorker> {
  const { logger, connection, keyPrefix } = options;
  const serviceMetrics = options.serviceMetrics ?? createServiceMetrics("delivery-worker");
  const metrics = new WorkerMetrics(serviceMetrics.registry);
  const db = openWorkerDatabase(options.pool);
  // A job of the other queues in flight at close: ended within an attempt's time, or left to its lock.
  const jobBoundMs = options.deliveryTimeoutMs + 5000;
  const parts = new Parts(logger);
  return parts.startAll(async () => {
    const shards = parts.add(startShards({ connection, keyPrefix, queueShards: options.queueShards ?? DEFAULT_QUEUE_SHARDS, logger }));
    const mail = parts.add(startNotifications({ connection, keyPrefix, sql: db.sql, mailTransport: options.mailTransport, mailFrom: options.mailFrom, metrics, logger, jobBoundMs }));
    const retention = parts.add(
      await startMaintenance({
        connection,
        keyPrefix,
        pool: options.pool,
        retentionDays: options.retentionDays,
        partitionsAheadDays: options.partitionsAheadDays,
        retentionIntervalMs: options.retentionIntervalMs,
        metrics,
        logger,
        jobBoundMs,
      }),
    );
    const recoveries = parts.add(
      startRecoveries({ connection, keyPrefix, deps: { sql: db.sql, recoveries: db.recoveries, log: db.log, history: db.history, signals: shards.signals, logger }, logger, jobBoundMs }),
    );
    const analytics = parts.add(
      await startAnalytics({
        connection,
        keyPrefix,
        flush: options.analytics
          ? {
              intervalMs: options.analytics.flushIntervalMs,
              deps: {
                redis: connection,
                sql: db.sql,
                log: db.log,
                signals: shards.signals,
                keyPrefix,
                playUrl: options.analytics.playUrl,
                batchMax: options.analytics.batchMax,
                logger,
                metrics,
              },
            }
          : null,
        logger,
        jobBoundMs,
      }),
    );
    parts.closeTogether("other queues", 4);
    const deliveries = parts.add(
      await startDeliveries({
        ...options,
        queues: shards.queues,
        signals: shards.signals,
        retryAfterMaxMs: options.retryAfterMaxMs ?? DEFAULT_RETRY_AFTER_MAX_MS,
        drainLingerMs: options.drainLingerMs ?? DEFAULT_DRAIN_LINGER_MS,
        log: db.log,
        endpoints: db.endpoints,
        notifications: mail.queue,
        metrics,
      }),
    );
    const reconciling = startReconciler({
      reconcile: options.reconcile,
      keyPrefix,
      log: db.log,
      queues: shards.queues,
      signals: shards.signals,
      timers: deliveries.timers,
      redis: connection,
      logger,
      metrics,
    });
    if (reconciling) parts.add(reconciling);
    const queues = { notifications: mail.queue, maintenance: retention.queue, analytics: analytics.queue, recoveries: recoveries.queue };
    parts.add(startMetricsWatch({ metrics, queues: [...shards.queues.shards, ...Object.values(queues)], log: db.log, windows: deliveries.windows }));
    return {
      db,
      serviceMetrics,
      metrics,
      deliveries,
      queues,
      workers: [...deliveries.workers, ...[mail, retention, recoveries, analytics].flatMap((p) => (p.worker ? [p.worker] : []))],
      reconciler: reconciling?.reconciler ?? null,
      gate: deliveries.gate,
      close: () => parts.close(),
    };
  });
}
