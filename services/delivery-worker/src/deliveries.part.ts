/**
 * The deliveries part of the worker process, started and closed here: one drain worker per shard
 * of the deliveries queue (the shards themselves are shards.part.ts's), the dependency gate that
 * pauses them while PostgreSQL or Redis is down, and what every drain shares (the process's
 * attempt slots, the log's group commits, the endpoints' windows, the retry timers, the wakes of
 * lingering drains, the HTTP agents).
 */
import { setMaxListeners } from "node:events";
import type { LookupFunction } from "node:net";
import type { Queue, Worker } from "bullmq";
import type { DeliveryLog, EndpointStore, PgPool } from "@vw/db";
import { DrainWakes, type DeliveryQueues, type DrainSignals, type RedisClient } from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import { createDeliveryAgents, destroyDeliveryAgents, SecretCache, type DeliveryProxy, type EndpointUrlPolicy, type SecretBox } from "@vw/webhook-core";
import { AttemptSlots } from "./attempt-slots.js";
import { closeWithin } from "./bounded-close.js";
import { DeliveryStore } from "./delivery-store.js";
import { CLAIM_ROUNDS, type DrainDeps } from "./drain.js";
import { createDrainsWorker } from "./drains.worker.js";
import { DependencyGate } from "./dependency-gate.js";
import { EndpointDisabler } from "./endpoint-disabler.js";
import type { WorkerMetrics } from "./metrics.js";
import type { Part } from "./part.js";
import { WakeTimers } from "./wake-timers.js";
import { EndpointWindows } from "./windows.js";

/** Added to a claim's sending time for its lease: the log write after the attempts, clock steps. */
const LEASE_MARGIN_MS = 10_000;

/** What the deliveries part is built from. */
export interface DeliveriesPartOptions {
  connection: RedisClient;
  keyPrefix: string;
  /** The pool the dependency gate probes (the delivery log's). */
  pool: PgPool;
  /** The shard layout (shards.part.ts): a drain worker per shard. */
  queues: DeliveryQueues;
  signals: DrainSignals;
  log: DeliveryLog;
  endpoints: EndpointStore;
  notifications: Queue;
  logger: Logger;
  metrics: WorkerMetrics;
  secretBox: SecretBox;
  endpointUrlPolicy: EndpointUrlPolicy;
  deliveryLookup?: LookupFunction;
  /** DELIVERY_PROXY_URL: every attempt goes through it (null: straight to the receiver). */
  deliveryProxy?: DeliveryProxy | null;
  deliveryTimeoutMs: number;
  retryDelays: readonly number[];
  disableAfterFailures: number;
  retryAfterMaxMs: number;
  deliveryConcurrency: number;
  endpointConcurrency: number;
  jobLockMs: number;
  /** DRAIN_LINGER_MS. */
  drainLingerMs: number;
  random?: () => number;
  now?: () => Date;
}

/** The running deliveries part. */
export interface DeliveriesPart extends Part {
  queues: DeliveryQueues;
  signals: DrainSignals;
  timers: WakeTimers;
  windows: EndpointWindows;
  store: DeliveryStore;
  workers: Worker[];
  /** Closed while a dependency is down (the drain workers take no jobs meanwhile). */
  gate: DependencyGate;
  /** Stops starting attempts, lets those in flight end and be logged, closes the shards' workers (not their queues). */
  close(): Promise<void>;
}

/** Drains running at once per shard at most: lingering ones hold a job each, attempts are bounded apart (DELIVERY_CONCURRENCY). */
const DRAINS_PER_SHARD = 1000;

/** Starts the deliveries part (see the file comment). */
export async function startDeliveries(options: DeliveriesPartOptions): Promise<DeliveriesPart> {
  const { logger, metrics, queues, signals } = options;
  const gate = new DependencyGate({
    logger,
    probes: [
      { dependency: "postgresql", check: () => options.pool.query("SELECT 1") },
      { dependency: "redis", check: () => options.connection.ping() },
    ],
  });
  const wakes = new DrainWakes(options.connection, options.keyPrefix, redisClientErrorListener(logger, "drain wakes subscriber error"));
  await wakes.start();
  const timers = new WakeTimers(signals);
  const windows = new EndpointWindows(signals, options.endpointConcurrency, metrics, (err) => logger.debug({ err }, "storing or reading an endpoint's window failed"));
  // A claim holds what its drain sends over CLAIM_ROUNDS attempt durations at most.
  const store = new DeliveryStore(options.log, { leaseMs: options.deliveryTimeoutMs * CLAIM_ROUNDS + LEASE_MARGIN_MS });
  const agents = createDeliveryAgents(options.endpointUrlPolicy, { proxy: options.deliveryProxy ?? null, ...(options.deliveryLookup ? { lookup: options.deliveryLookup } : {}) });
  const deps: DrainDeps = {
    store,
    signals,
    wakes,
    lingerMs: options.drainLingerMs,
    timers,
    windows,
    attempts: new AttemptSlots(options.deliveryConcurrency),
    disabler: new EndpointDisabler(options.endpoints, options.notifications, logger),
    secrets: new SecretCache(options.secretBox),
    agents,
    metrics,
    timeoutMs: options.deliveryTimeoutMs,
    retryDelays: options.retryDelays,
    disableAfterFailures: options.disableAfterFailures,
    retryAfterMaxMs: options.retryAfterMaxMs,
    random: options.random,
    now: options.now,
    // The delivery log says only "not a public address" or "could not connect"; the address or the resolver's answer is for operators.
    onHiddenDetail: (info) =>
      logger.warn(info, info.kind === "refused-by-policy" ? "delivery refused by ENDPOINT_URL_POLICY" : "delivery could not connect (retried): see detail"),
    onError: (err, what) => logger.warn({ err: err as Error }, `${what} failed; its claim's lease brings the delivery back`),
  };
  const stopping = new AbortController();
  // Every running drain listens on it (up to DRAINS_PER_SHARD per shard): not a leak.
  setMaxListeners(0, stopping.signal);
  const workers = queues.shards.map((queue) => {
    const worker = createDrainsWorker({
      connection: options.connection,
      prefix: queue.opts.prefix as string,
      concurrency: DRAINS_PER_SHARD,
      jobLockMs: options.jobLockMs,
      logger,
      deps,
      signals,
      stop: stopping.signal,
      onPlatformFailure: () => metrics.platformFailures.inc(),
      onDependencyDown: (err) => gate.close(err),
    });
    gate.guard(worker);
    return worker;
  });
  return {
    name: "deliveries",
    queues,
    signals,
    timers,
    windows,
    store,
    workers,
    gate,
    async close() {
      gate.stop();
      stopping.abort();
      // A log write waiting for PostgreSQL gives up now rather than hold the shutdown.
      store.stopRetrying();
      // An attempt in flight ends within its timeout and its log write, so by then every drain is done.
      const boundMs = options.deliveryTimeoutMs + LEASE_MARGIN_MS;
      await Promise.all(workers.map((w) => closeWithin(logger, w.close(), boundMs, `worker ${w.name}`)));
      await wakes.close();
      destroyDeliveryAgents(agents);
    },
  };
}
