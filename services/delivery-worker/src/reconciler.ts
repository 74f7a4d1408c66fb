/**
 * The reconciler: PostgreSQL is the schedule of record; Redis only says which endpoints have work
 * (their drain jobs and retry timers), and this puts that back whenever it may be missing.
 *
 * Every worker replica runs one; a lease in Redis makes one of them active at a time. The active one
 * - checks each delivery shard's index marker every `checkIntervalMs`: a marker gone means Redis
 *   lost the shard's data (restarted empty, a failover to a replica that never had it, a FLUSHDB,
 *   an eviction), and every endpoint of that shard with pending deliveries is woken at once (those
 *   due now get a drain), every retry due later gets its timer again (one per endpoint and due
 *   tick, set in Redis whatever this process remembers of the timers Redis lost), then the marker
 *   is set;
 * - every `sweepIntervalMs` (RECONCILE_INTERVAL_MS) does the same for every endpoint: the wake of a
 *   process killed between its commit and its wake (intake, Replay, recover, a retry's timer, the
 *   analytics flush), a job lost to a failover. A wake of an endpoint already being drained only
 *   sets its flag.
 *
 * One loose index scan of the pending deliveries per pass (`DeliveryLog.dueEndpoints`): its cost
 * follows the endpoints with pending deliveries, not the deliveries themselves. A rebuild also
 * reads the due times of the retries waiting (`DeliveryLog.pendingLater`): it follows them, and
 * happens only when Redis lost its data.
 */
import { randomUUID } from "node:crypto";
import type { Queue } from "bullmq";
import type { DeliveryLog, DueEndpoint } from "@vw/db";
import { RedisLease, TIMER_TICK_MS, indexMarkerKey, type DeliveryQueues, type DrainSignals, type RedisClient } from "@vw/queues";
import type { Logger } from "@vw/service-kit";
import type { WorkerMetrics } from "./metrics.js";
import type { WakeTimers } from "./wake-timers.js";

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  log: Pick<DeliveryLog, "dueEndpoints" | "pendingLater">;
  /** The deliveries queue's shards (QUEUE_SHARDS): the markers checked. */
  queues: DeliveryQueues;
  /** `wakeAt` sets a rebuild's timers in Redis directly: `timers` remembers the ones Redis lost as set. */
  signals: Pick<DrainSignals, "wake" | "wakeAt">;
  timers: Pick<WakeTimers, "wakeAt">;
  redis: RedisClient;
  /** The lease's key (one per deployment: `<REDIS_KEY_PREFIX>:reconciler:lease`). */
  leaseKey: string;
  /** RECONCILE_INTERVAL_MS: how often every endpoint with due work is woken. */
  sweepIntervalMs: number;
  /** How often the markers and the lease are checked (default 1 s). */
  checkIntervalMs?: number;
  logger: Logger;
  metrics?: WorkerMetrics;
  now?: () => number;
}

/**
 * A sweep leaves alone what became due this recently: its writer is waking it right now (an
 * intake wakes its endpoints just after its commit).
 */
const SWEEP_GRACE_MS = 1000;

/** How long {@link Reconciler.stop} waits for a pass in progress. */
const STOP_WAIT_MS = 5000;

/** Timers a rebuild sets at once (each a Redis round trip). */
const REBUILD_TIMERS_AT_ONCE = 100;

/** What one pass did. */
export interface ReconcileReport {
  /** Endpoints with pending deliveries. */
  endpoints: number;
  /** Drain jobs added (endpoints with due work and no drain). */
  woken: number;
}

/** See the file comment. */
export class Reconciler {
  private readonly lease: RedisLease;
  private readonly checkIntervalMs: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private nextSweepAt = 0;
  private active = false;

  constructor(private readonly options: ReconcilerOptions) {
    this.checkIntervalMs = options.checkIntervalMs ?? 1000;
    this.now = options.now ?? Date.now;
    // Three checks' worth: a holder that misses two renewals in a row has lost it.
    this.lease = new RedisLease(options.redis, options.leaseKey, this.checkIntervalMs * 3);
  }

  /** Starts checking (the first check at once). */
  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Stops, waits for a pass in progress, and gives the lease up. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    // A pass waiting on an unavailable Redis or PostgreSQL is left behind after a few seconds: it
    // holds nothing that another replica's reconciler cannot redo.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.running, new Promise((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)))]);
    clearTimeout(timer);
    if (this.active) await Promise.race([this.lease.release().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, STOP_WAIT_MS).unref())]);
    this.active = false;
  }

  /** True while this replica holds the lease. */
  get isActive(): boolean {
    return this.active;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.tick().finally(() => {
        this.running = null;
        this.schedule(this.checkIntervalMs);
      });
    }, ms);
    this.timer.unref();
  }

  /** One check: lease, markers, and the sweep when it is time. Never throws (logged; the next check tries again). */
  async tick(): Promise<void> {
    try {
      this.active = await this.lease.hold();
      if (!this.active) return;
      const redis = this.options.redis;
      const markers = await Promise.all(this.options.queues.shards.map((q) => redis.get(indexMarkerKey(q))));
      const lost = this.options.queues.shards.filter((_, i) => markers[i] === null || (markers[i] as string).startsWith("rebuilding"));
      if (lost.length > 0) {
        await this.rebuild(lost);
        return;
      }
      if (this.now() >= this.nextSweepAt) {
        this.nextSweepAt = this.now() + this.options.sweepIntervalMs;
        await this.sweep();
      }
    } catch (err) {
      // Redis or PostgreSQL unavailable: their status lines say so; the next check tries again.
      this.options.logger.debug({ err: err as Error }, "reconciler check failed; trying again");
    }
  }

  /**
   * Wakes every endpoint of the lost shards that has pending deliveries (default: every shard), and
   * marks them indexed; redone for the shards whose data goes again meanwhile.
   */
  async rebuild(shards: readonly Queue[] = this.options.queues.shards): Promise<ReconcileReport> {
    const started = this.now();
    const redis = this.options.redis;
    let lost = [...shards];
    for (;;) {
      this.options.logger.warn({ shards: lost.length, of: this.options.queues.count }, "the dispatch index of delivery shards in Redis is gone: waking their endpoints from PostgreSQL");
      const epochs = await Promise.all(lost.map(async (q) => {
        const epoch = `rebuilding:${randomUUID()}`;
        await redis.set(indexMarkerKey(q), epoch);
        return epoch;
      }));
      const only = new Set(lost);
      const report = await this.wakeDue((e) => only.has(this.options.queues.queueFor(e.endpointId)), 0, true);
      const done = await Promise.all(
        lost.map(async (q, i) => {
          const epoch = epochs[i] as string;
          const set = await redis.eval(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0",
            1,
            indexMarkerKey(q),
            epoch,
            `indexed:${epoch.slice("rebuilding:".length)}`,
          );
          return Number(set) === 1;
        }),
      );
      lost = lost.filter((_, i) => !done[i]);
      if (lost.length === 0 || this.stopped) {
        this.options.metrics?.reconciled.inc({ reason: "rebuild" }, report.woken);
        this.options.logger.warn({ ...report, tookMs: this.now() - started }, "dispatch index rebuilt from PostgreSQL");
        this.nextSweepAt = this.now() + this.options.sweepIntervalMs;
        return report;
      }
    }
  }

  /** Wakes every endpoint with pending deliveries (see the file comment). */
  async sweep(): Promise<ReconcileReport> {
    const report = await this.wakeDue(() => true, SWEEP_GRACE_MS);
    if (report.woken > 0) {
      this.options.metrics?.reconciled.inc({ reason: "sweep" }, report.woken);
      this.options.logger.warn(report, "woke endpoints with due deliveries that had no drain");
    }
    return report;
  }

  /**
   * Wakes the endpoints `keep` selects: due now, a drain; due later, a timer at their earliest due
   * time, or with `everyRetry` (a rebuild: the timers of every retry are gone) a timer at each due
   * tick of their pending deliveries.
   */
  private async wakeDue(keep: (e: DueEndpoint) => boolean, graceMs = 0, everyRetry = false): Promise<ReconcileReport> {
    const due = (await this.options.log.dueEndpoints()).filter(keep);
    const now = this.now();
    const woken = await this.options.signals.wake(due.filter((e) => e.dueAt.getTime() <= now - graceMs).map((e) => e.endpointId));
    if (!everyRetry) {
      for (const e of due) if (e.dueAt.getTime() > now) await this.options.timers.wakeAt(e.endpointId, e.dueAt);
      return { endpoints: due.length, woken };
    }
    const ticks = new Map<string, DueEndpoint>();
    for (const e of (await this.options.log.pendingLater()).filter(keep)) ticks.set(`${e.endpointId}/${Math.ceil(e.dueAt.getTime() / TIMER_TICK_MS)}`, e);
    const timers = [...ticks.values()];
    for (let i = 0; i < timers.length; i += REBUILD_TIMERS_AT_ONCE) {
      await Promise.all(timers.slice(i, i + REBUILD_TIMERS_AT_ONCE).map((e) => this.options.signals.wakeAt(e.endpointId, e.dueAt)));
    }
    return { endpoints: due.length, woken };
  }
}
