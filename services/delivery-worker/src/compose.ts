/**
 * Builds the worker process's parts from plain options: the three BullMQ workers, the queue
 * handles they need, the shared delivery dependencies and the metrics. `main.ts` passes the
 * configuration; integration tests call it in-process with their own prefix, schedule and mail
 * transport.
 */
import type { LookupFunction } from "node:net";
import type { Queue, Worker } from "bullmq";
import type { RedisClient } from "@vw/queues";
import { DeliveryHistory, DeliveryLog, DeliveryRecoveries, EndpointStore, LogPartitions, pgRunner, type PgPool, type SqlRunner } from "@vw/db";
import {
  DEFAULT_QUEUE_SHARDS,
  EndpointScheduler,
  QUEUE_NAMES,
  clearLayout,
  keepAnnouncingLayout,
  layoutDrained,
  layoutInUse,
  openDeliveryQueues,
  openQueue,
  otherLayouts,
  registerLayout,
  retireLayout,
  sumBacklogStats,
  type BacklogStats,
  type DeliveryQueues,
} from "@vw/queues";
import { createServiceMetrics, redisClientErrorListener, withTimeout, type Logger, type ServiceMetrics } from "@vw/service-kit";
import { createDeliveryAgents, destroyDeliveryAgents, SecretCache, type EndpointUrlPolicy, type SecretBox } from "@vw/webhook-core";
import type { AnalyticsFlushDeps } from "./analytics-flush.js";
import { createAnalyticsWorker, scheduleAnalyticsFlush } from "./analytics.worker.js";
import { AttemptSlots, JOBS_PER_ATTEMPT_SLOT } from "./attempt-slots.js";
import { DeliveryStore } from "./delivery-store.js";
import type { DeliverDeps } from "./deliver.js";
import { createDeliveriesWorker } from "./deliveries.worker.js";
import { DependencyGate } from "./dependency-gate.js";
import { EndpointDisabler } from "./endpoint-disabler.js";
import { JobBudget } from "./job-budget.js";
import { LegacyQueues } from "./legacy-queues.js";
import { EndpointDisabledMailer, type MailTransport } from "./mailer.js";
import { createMaintenanceWorker, scheduleRetention } from "./maintenance.worker.js";
import { WorkerMetrics } from "./metrics.js";
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
  /** QUEUE_SHARDS: the deliveries queue's shards (default 16); this process serves them all. */
  queueShards?: number;
  logger: Logger;
  secretBox: SecretBox;
  endpointUrlPolicy: EndpointUrlPolicy;
  deliveryTimeoutMs: number;
  retryDelays: readonly number[];
  disableAfterFailures: number;
  deliveryConcurrency: number;
  endpointConcurrency: number;
  /** SCHEDULER_PARK_TIMEOUT_MS: safety-net delay of a parked job (its promotion is normally exact). */
  parkTimeoutMs: number;
  /** SCHEDULER_SLOT_WAIT_MS: how long a job waits in process for a slot of a busy endpoint before it parks (0: at once). */
  slotWaitMs: number;
  /** SCHEDULER_SWEEP_MS: how often this process takes back expired slots and hands them to parked jobs. */
  sweepIntervalMs: number;
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
  /**
   * The analytics flush schedule; without it this process runs no flush (tests that call
   * `flushAnalytics` themselves). `main.ts` always passes it.
   */
  analytics?: { flushIntervalMs: number; batchMax: number; playUrl: string };
  /** The process's metrics registry (`main.ts` creates it); a fresh one when absent. */
  serviceMetrics?: ServiceMetrics;
  /**
   * The reconciler (see reconciler.ts): RECONCILE_INTERVAL_MS between sweeps, and how often the
   * index marker is checked. Every process runs one (one replica at a time is active); only tests
   * that share a database with other files' workers go without.
   */
  reconcile?: { sweepIntervalMs: number; checkIntervalMs?: number } | null;
}

/** No endpoint: the shared deliver deps' scheduler is replaced by each shard worker's own. */
const NO_ENDPOINT = "00000000-0000-0000-0000-000000000000";

/** Added to the attempt timeout for a slot's lease: the log write after the attempt, clock steps. */
const LEASE_MARGIN_MS = 5000;

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
  queues: Record<Exclude<keyof typeof QUEUE_NAMES, "deliveries">, Queue> & { deliveries: DeliveryQueues };
  /** Every BullMQ worker of the process: one per delivery shard (of every layout served), and one per other queue. */
  workers: Worker[];
  /** The scheduler (per-endpoint windows, parked jobs, throttle) of the endpoint's shard. */
  schedulerFor(endpointId: string): EndpointScheduler;
  /** Backlog figures summed over the shards (also served on `/metrics`). */
  backlog(): Promise<BacklogStats>;
  /** The reconciler, when this process runs one. */
  reconciler: Reconciler | null;
  /** Closed while a dependency is down (this process takes no deliveries meanwhile). */
  gate: DependencyGate;
  /** Stops taking jobs, lets in-flight ones finish, closes queues and agents (not Redis or the pool). */
  close(): Promise<void>;
}

/** Starts the delivery, notification, maintenance and recovery workers (and the analytics one when scheduled). */
export async function startDeliveryWorker(options: DeliveryWorkerOptions): Promise<DeliveryWorker> {
  const serviceMetrics = options.serviceMetrics ?? createServiceMetrics("delivery-worker");
  const metrics = new WorkerMetrics(serviceMetrics.registry);
  const queues = {
    deliveries: openDeliveryQueues(options.connection, options.keyPrefix, options.queueShards ?? DEFAULT_QUEUE_SHARDS),
    notifications: openQueue(QUEUE_NAMES.notifications, options.connection, options.keyPrefix),
    maintenance: openQueue(QUEUE_NAMES.maintenance, options.connection, options.keyPrefix),
    analytics: openQueue(QUEUE_NAMES.analytics, options.connection, options.keyPrefix),
    recoveries: openQueue(QUEUE_NAMES.recoveries, options.connection, options.keyPrefix),
  };
  const otherQueues = [queues.notifications, queues.maintenance, queues.analytics, queues.recoveries];
  // BullMQ prints an unlistened queue error to stderr, once per reconnect attempt during an outage.
  for (const queue of [...queues.deliveries.shards, ...otherQueues]) queue.on("error", redisClientErrorListener(options.logger, "queue error"));
  const agents = createDeliveryAgents(options.endpointUrlPolicy, options.deliveryLookup ? { lookup: options.deliveryLookup } : {});
  const schedulerOptions = {
    maxWindow: options.endpointConcurrency,
    // A slot is held at most for the attempt (bounded by the timeout) and its log write.
    leaseTtlMs: options.deliveryTimeoutMs + LEASE_MARGIN_MS,
    parkTimeoutMs: options.parkTimeoutMs,
  };
  const schedulers = new Map<Queue, EndpointScheduler>();
  const schedulersOf = async (layout: DeliveryQueues) => {
    for (const queue of layout.shards) schedulers.set(queue, await EndpointScheduler.forQueue(queue, schedulerOptions));
  };
  await schedulersOf(queues.deliveries);
  // Other shard counts whose queues may still hold jobs (an earlier QUEUE_SHARDS, or producers
  // still on it during a rollout): served (and swept) until drained and no process uses them.
  const draining = new Map<DeliveryQueues, Worker[]>();
  const openDraining = async (count: number) => {
    const layout = openDeliveryQueues(options.connection, options.keyPrefix, count);
    layout.on("error", redisClientErrorListener(options.logger, "queue error"));
    await schedulersOf(layout);
    draining.set(layout, []);
    return layout;
  };
  for (const count of await registerLayout(options.connection, options.keyPrefix, queues.deliveries.count)) await openDraining(count);
  const announcer = keepAnnouncingLayout(options.connection, options.keyPrefix, queues.deliveries.count, (err) =>
    options.logger.debug({ err }, "announcing the delivery shard layout in use failed; tried again shortly"),
  );
  const schedulerFor = (endpointId: string) => schedulers.get(queues.deliveries.queueFor(endpointId)) as EndpointScheduler;
  const backlog = async () => sumBacklogStats(await Promise.all([...schedulers.values()].map((s) => s.stats())));
  metrics.watchQueues([...queues.deliveries.shards, ...otherQueues], { queues: queues.deliveries.shards, stats: backlog });
  const sql = pgRunner(options.pool);
  const db: WorkerDatabase = { pool: options.pool, sql, log: new DeliveryLog(sql), history: new DeliveryHistory(sql), endpoints: new EndpointStore(sql), recoveries: new DeliveryRecoveries(sql) };
  const deps: DeliverDeps = {
    store: new DeliveryStore(db.log),
    attempts: new AttemptSlots(options.deliveryConcurrency),
    scheduler: schedulerFor(NO_ENDPOINT),
    onSchedulerError: (err) => options.logger.warn({ err: err as Error }, "releasing an endpoint slot failed; its lease expires by itself"),
    // The delivery log says only "not a public address" or "could not connect"; the address or the resolver's answer is for operators.
    onHiddenDetail: (info) =>
      options.logger.warn(info, info.kind === "refused-by-policy" ? "delivery refused by ENDPOINT_URL_POLICY" : "delivery could not connect: its host had no address (retried)"),
    disabler: new EndpointDisabler(db.endpoints, queues.notifications, options.logger),
    secrets: new SecretCache(options.secretBox),
    agents,
    metrics,
    timeoutMs: options.deliveryTimeoutMs,
    slotWaitMs: options.slotWaitMs,
    retryDelays: options.retryDelays,
    disableAfterFailures: options.disableAfterFailures,
    random: options.random,
    now: options.now,
  };
  const gate = new DependencyGate({
    logger: options.logger,
    probes: [
      { dependency: "postgresql", check: () => options.pool.query("SELECT 1") },
      { dependency: "redis", check: () => options.connection.ping() },
    ],
  });
  const mailer = new EndpointDisabledMailer(sql, options.mailTransport, options.mailFrom, options.logger);
  // Partitions ahead at start-up too, so a fresh replica never waits for the first scheduled run;
  // a failure is logged and left to that run (there are days of margin, and deliveries go on).
  await new LogPartitions(options.pool).ensureAhead(options.partitionsAheadDays).catch((err: unknown) => {
    options.logger.error({ err }, "delivery log: partitions ahead not ensured at start-up (the retention job retries)");
  });
  await scheduleRetention(queues.maintenance, options.retentionIntervalMs);
  // More jobs than attempt slots: a job whose attempt is answered waits for its log write without
  // keeping the next POST from starting (attempt-slots.ts). One budget for every shard's worker.
  const jobsInHand = options.deliveryConcurrency * JOBS_PER_ATTEMPT_SLOT;
  const budget = new JobBudget(jobsInHand);
  const shardWorker = (queue: Queue) => {
    const worker = createDeliveriesWorker({
      connection: options.connection,
      prefix: queue.opts.prefix as string,
      concurrency: jobsInHand,
      budget,
      jobLockMs: options.jobLockMs,
      logger: options.logger,
      deps: { ...deps, scheduler: schedulers.get(queue) as EndpointScheduler },
      onDependencyDown: (err) => {
        metrics.platformFailures.inc();
        gate.close(err);
      },
    });
    gate.guard(worker);
    return worker;
  };
  const deliveryWorkers = queues.deliveries.shards.map(shardWorker);
  for (const [layout, served] of draining) served.push(...layout.shards.map(shardWorker));
  const notificationsWorker = (prefix?: string) =>
    createNotificationsWorker({ connection: options.connection, keyPrefix: options.keyPrefix, mailer, metrics, logger: options.logger, ...(prefix === undefined ? {} : { prefix }) });
  const recoveriesWorker = (prefix?: string) =>
    createRecoveriesWorker({
      connection: options.connection,
      keyPrefix: options.keyPrefix,
      deps: { sql, log: db.log, history: db.history, deliveries: queues.deliveries, logger: options.logger },
      ...(prefix === undefined ? {} : { prefix }),
    });
  const workers = [
    ...deliveryWorkers,
    notificationsWorker(),
    createMaintenanceWorker({
      connection: options.connection,
      keyPrefix: options.keyPrefix,
      pool: options.pool,
      retentionDays: options.retentionDays,
      partitionsAheadDays: options.partitionsAheadDays,
      metrics,
      logger: options.logger,
    }),
    recoveriesWorker(),
  ];
  // Mails and recover jobs queued under the key layout before hash tags are run from there (legacy-queues.ts).
  const legacy = new LegacyQueues({
    redis: options.connection,
    keyPrefix: options.keyPrefix,
    startWorker: (queue, prefix) => (queue === QUEUE_NAMES.notifications ? notificationsWorker(prefix) : recoveriesWorker(prefix)),
    onStarted: (queue) => options.logger.info({ legacyQueue: queue }, "running the jobs left under the old key layout"),
    onDrained: (queue) => options.logger.info({ legacyQueue: queue }, "no job left under the old key layout"),
  });
  await legacy.sweep().catch((err: unknown) => options.logger.warn({ err: err as Error }, "looking for jobs under the old key layout failed; retried next interval"));
  if (options.analytics) {
    const flushDeps: AnalyticsFlushDeps = {
      redis: options.connection,
      sql: db.sql,
      log: db.log,
      deliveries: queues.deliveries,
      keyPrefix: options.keyPrefix,
      playUrl: options.analytics.playUrl,
      batchMax: options.analytics.batchMax,
      logger: options.logger,
      metrics,
    };
    await scheduleAnalyticsFlush(queues.analytics, options.analytics.flushIntervalMs);
    workers.push(createAnalyticsWorker({ keyPrefix: options.keyPrefix, deps: flushDeps }));
  }
  let closing = false;
  // A layout registered since start (a producer started on another count) is served too; looked
  // for at each sweep and by the reconciler before it queues a run again (its job may be there).
  let discovering: Promise<void> | null = null;
  const discoverLayouts = (): Promise<void> =>
    (discovering ??= (async () => {
      for (const count of await otherLayouts(options.connection, options.keyPrefix, queues.deliveries.count)) {
        if (closing) return;
        if ([...draining.keys()].some((l) => l.count === count)) continue;
        const layout = await openDraining(count);
        (draining.get(layout) as Worker[]).push(...layout.shards.map(shardWorker));
        options.logger.info({ queueShards: count }, "another delivery shard layout is in use; its queues are served until drained");
      }
    })().finally(() => (discovering = null)));
  const reconciler = options.reconcile
    ? new Reconciler({
        log: db.log,
        queues: queues.deliveries,
        draining: async () => {
          await discoverLayouts();
          return [...draining.keys()];
        },
        redis: options.connection,
        leaseKey: `${options.keyPrefix.replace(/:+$/, "")}:reconciler:lease`,
        sweepIntervalMs: options.reconcile.sweepIntervalMs,
        checkIntervalMs: options.reconcile.checkIntervalMs,
        logger: options.logger,
        metrics,
      })
    : null;
  reconciler?.start();
  // Expired leases (a killed worker's slots) free nobody by themselves: the sweep hands them on.
  // A drained earlier layout is forgotten and its workers closed; so are the old key layout's.
  let sweeping = false;
  const sweepAll = async () => {
    for (const scheduler of schedulers.values()) {
      await scheduler.sweep().catch((err: unknown) => options.logger.warn({ err: err as Error }, "scheduler sweep failed; retried next interval"));
    }
    await legacy.sweep().catch((err: unknown) => options.logger.warn({ err: err as Error }, "looking for jobs under the old key layout failed; retried next interval"));
    await discoverLayouts();
    for (const [layout, served] of draining) {
      // Not while a process may still queue into it (it announces the layout), nor while it holds a job.
      if (await layoutInUse(options.connection, options.keyPrefix, layout.count)) continue;
      if (!(await layoutDrained(layout))) continue;
      await retireLayout(options.connection, options.keyPrefix, layout.count);
      draining.delete(layout);
      for (const queue of layout.shards) schedulers.delete(queue);
      await Promise.all(served.map((w) => w.close()));
      await clearLayout(options.connection, layout);
      await layout.close();
      options.logger.info({ queueShards: layout.count }, "an earlier delivery shard layout is drained; its queues are no longer served and its keys are deleted");
    }
  };
  const sweeper = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    sweepAll()
      .catch((err: unknown) => options.logger.warn({ err: err as Error }, "draining an earlier shard layout failed; retried next interval"))
      .finally(() => (sweeping = false));
  }, options.sweepIntervalMs);
  sweeper.unref();
  return {
    db,
    serviceMetrics,
    metrics,
    queues,
    workers,
    schedulerFor,
    backlog,
    reconciler,
    gate,
    async close() {
      closing = true;
      clearInterval(sweeper);
      announcer.stop();
      gate.stop();
      // A log write waiting for PostgreSQL gives up now rather than hold the shutdown: its job runs again later.
      deps.store.stopRetrying();
      await reconciler?.stop();
      // An attempt in flight ends within its timeout and its log write, so by then every job this
      // process took is done. BullMQ's close can wait longer than that on a blocking connection
      // still backing off after a Redis outage (a known BullMQ behaviour); past the bound it is
      // left behind, named in the log, instead of holding the process until it is killed.
      const boundMs = options.deliveryTimeoutMs + LEASE_MARGIN_MS;
      const within = (closing: Promise<unknown>, ms: number, what: string) =>
        withTimeout(closing, ms, what).catch((err: unknown) => {
          if (!(err instanceof Error && err.message === what)) throw err; // the close itself failed
          options.logger.warn({ closing: what, waitedMs: ms }, "did not close in time (a Redis connection still reconnecting); left behind");
        });
      const drainingWorkers = [...draining.values()].flat();
      await Promise.all([...workers, ...drainingWorkers].map((w) => within(w.close(), boundMs, `worker ${w.name}`)));
      await within(legacy.close(), boundMs, "workers of the old key layout");
      const allQueues = [...queues.deliveries.shards, ...[...draining.keys()].flatMap((l) => l.shards), ...otherQueues];
      await Promise.all(allQueues.map((q) => within(q.close(), LEASE_MARGIN_MS, `queue ${q.name}`)));
      destroyDeliveryAgents(agents);
    },
  };
}
