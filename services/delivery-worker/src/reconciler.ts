/**
 * The reconciler: PostgreSQL is the schedule of record, Redis a dispatch index this rebuilds.
 *
 * Every worker replica runs one; a lease in Redis makes one of them active at a time. The active one
 * - checks the index marker every `checkIntervalMs`: a marker gone means Redis lost the queue's data
 *   (restarted empty, a failover to a replica that never had it, a FLUSHDB, an eviction), and every
 *   pending delivery is queued again at once: those due now to run, the others delayed to their
 *   due time;
 * - every `sweepIntervalMs` (RECONCILE_INTERVAL_MS) walks the pending deliveries that are due and
 *   queues again each one without a job: the delivery of a process killed between its write and
 *   its enqueue (intake, Replay, recover, a retry, the analytics flush), a job lost to a failover.
 *
 * The index is kept per delivery shard (delivery-shards.ts): each shard's queue has its own marker,
 * so a shard lost alone (a Cluster primary that failed over to a replica that missed its writes) is
 * rebuilt alone, with only its endpoints' deliveries. A run whose job still waits in a layout being
 * drained (an earlier QUEUE_SHARDS) counts as having one, so a change of shard count never queues
 * a delivery twice.
 *
 * Both walk the partial index of pending rows in pages, and queueing is idempotent: a run's job id
 * is its deliveryId and run (`deliverJobId`), so a run that has a job is never queued twice, and
 * the job sends the delivery under its own deliveryId. A sweep visits at most `sweepMaxRows` rows and
 * goes on from there at the next one, so its cost stays bounded whatever the backlog.
 */
import type { Queue } from "bullmq";
import type { DeliveryQueues, RedisClient } from "@vw/queues";
import type { DeliveryLog, ScheduleCursor, ScheduledDelivery } from "@vw/db";
import { RedisLease, enqueueDeliveries, indexState, markIndexed, markRebuilding, runsWithoutJob, type DeliverJobRequest } from "@vw/queues";
import type { Logger } from "@vw/service-kit";
import type { WorkerMetrics } from "./metrics.js";

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  /** Reads the schedule of record (`pendingDue`). */
  log: Pick<DeliveryLog, "pendingDue">;
  /** The deliveries queue's shards (QUEUE_SHARDS): the index rebuilt into. */
  queues: DeliveryQueues;
  /** Other layouts being drained (an earlier QUEUE_SHARDS, or producers on another one): a run with a job there has one. */
  draining?: () => readonly DeliveryQueues[] | Promise<readonly DeliveryQueues[]>;
  redis: RedisClient;
  /** The lease's key (one per deployment: `<REDIS_KEY_PREFIX>:reconciler:lease`). */
  leaseKey: string;
  /** RECONCILE_INTERVAL_MS: how often the due deliveries are swept. */
  sweepIntervalMs: number;
  /** How often the marker and the lease are checked (default 1 s). */
  checkIntervalMs?: number;
  /** Most rows one sweep visits (default 100,000); the next sweep goes on from there. */
  sweepMaxRows?: number;
  /** Rows per page (default 1000). */
  pageSize?: number;
  logger: Logger;
  metrics?: WorkerMetrics;
  now?: () => number;
}

/** How long {@link Reconciler.stop} waits for a pass in progress. */
const STOP_WAIT_MS = 5000;

/** A sweep leaves alone what became due this recently: its writer is queueing it right now. */
const SWEEP_GRACE_MS = 1000;

/** What one pass queued. */
export interface ReconcileReport {
  visited: number;
  queued: number;
}

/** See the file comment. */
export class Reconciler {
  private readonly lease: RedisLease;
  private readonly checkIntervalMs: number;
  private readonly sweepMaxRows: number;
  private readonly pageSize: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private nextSweepAt = 0;
  /** Where the last sweep stopped (it goes on from there), or null to start from the oldest. */
  private sweepCursor: ScheduleCursor | null = null;
  private active = false;

  constructor(private readonly options: ReconcilerOptions) {
    this.checkIntervalMs = options.checkIntervalMs ?? 1000;
    this.sweepMaxRows = options.sweepMaxRows ?? 100_000;
    this.pageSize = options.pageSize ?? 1000;
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

  /** One check: lease, marker, and the sweep when it is time. Never throws (logged; the next check tries again). */
  async tick(): Promise<void> {
    try {
      this.active = await this.lease.hold();
      if (!this.active) return;
      const states = await Promise.all(this.options.queues.shards.map((q) => indexState(this.options.redis, q)));
      const lost = this.options.queues.shards.filter((_, i) => states[i] !== "indexed");
      if (lost.length > 0) {
        await this.rebuild(lost, states.includes("rebuilding") ? "rebuilding" : "missing");
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
   * Queues every pending delivery of the lost shards again (their index's data is gone): due ones
   * now, oldest first, later ones delayed to their time. Redone for the shards whose data goes
   * again meanwhile. Default: every shard.
   */
  async rebuild(shards: readonly Queue[] = this.options.queues.shards, state: "missing" | "rebuilding" = "missing"): Promise<ReconcileReport> {
    const started = this.now();
    let lost = [...shards];
    const total: ReconcileReport = { visited: 0, queued: 0 };
    for (;;) {
      this.options.logger.warn(
        { marker: state, shards: lost.length, of: this.options.queues.count },
        "the dispatch index of delivery shards in Redis is gone: queueing their pending deliveries again from PostgreSQL",
      );
      const epochs = await Promise.all(lost.map((q) => markRebuilding(this.options.redis, q)));
      const report = await this.walk(Number.POSITIVE_INFINITY, null, Number.POSITIVE_INFINITY, new Set(lost));
      total.visited += report.visited;
      total.queued += report.queued;
      const done = await Promise.all(lost.map((q, i) => markIndexed(this.options.redis, q, epochs[i] as string)));
      lost = lost.filter((_, i) => !done[i]);
      if (lost.length === 0) {
        const report = total;
        this.options.metrics?.reconciled.inc({ reason: "rebuild" }, report.queued);
        this.options.logger.warn({ ...report, tookMs: this.now() - started }, "dispatch index rebuilt from PostgreSQL");
        // The sweep starts over too: whatever it had visited was queued just now.
        this.sweepCursor = null;
        this.nextSweepAt = this.now() + this.options.sweepIntervalMs;
        return report;
      }
      if (this.stopped) return total;
    }
  }

  /** Queues again the due deliveries without a job (see the file comment). */
  async sweep(): Promise<ReconcileReport> {
    const report = await this.walk(this.now() - SWEEP_GRACE_MS, this.sweepCursor, this.sweepMaxRows);
    if (report.queued > 0) {
      this.options.metrics?.reconciled.inc({ reason: "sweep" }, report.queued);
      this.options.logger.warn(report, "queued again pending deliveries that had no job");
    }
    return report;
  }

  /**
   * Walks the pending deliveries due by `dueBy` from `from`, at most `maxRows`, queueing those
   * without a job; the sweep's cursor is left where it stopped (null once the end was reached).
   */
  private async walk(dueBy: number, from: ScheduleCursor | null, maxRows: number, only?: ReadonlySet<Queue>): Promise<ReconcileReport> {
    const dueByDate = Number.isFinite(dueBy) ? new Date(dueBy) : null;
    let cursor = from;
    let visited = 0;
    let queued = 0;
    let renewedAt = this.now();
    let next: Promise<ScheduledDelivery[]> | null = null;
    while (!this.stopped && visited < maxRows) {
      if (this.now() - renewedAt >= this.checkIntervalMs) {
        // A long walk keeps its lease; one that lost it (a pause longer than the lease) stops, and
        // the new holder walks instead.
        renewedAt = this.now();
        this.active = await this.lease.hold();
        if (!this.active) break;
      }
      const page = await (next ?? this.options.log.pendingDue(dueByDate, cursor, this.pageSize));
      next = null;
      if (page.length === 0) {
        cursor = null;
        break;
      }
      visited += page.length;
      const last = page[page.length - 1] as ScheduledDelivery;
      cursor = { nextAttemptAt: last.nextAttemptAt, deliveryId: last.deliveryId };
      const more = page.length === this.pageSize && visited < maxRows;
      // The next page is read from PostgreSQL while this one is queued in Redis.
      if (more) {
        next = this.options.log.pendingDue(dueByDate, cursor, this.pageSize);
        next.catch(() => undefined);
      }
      queued += await this.queueMissing(only ? page.filter((d) => only.has(this.options.queues.queueFor(d.endpointId))) : page);
      if (!more) {
        if (page.length < this.pageSize) cursor = null;
        break;
      }
    }
    await next?.catch(() => undefined);
    if (Number.isFinite(maxRows)) this.sweepCursor = cursor;
    return { visited, queued };
  }

  private async queueMissing(page: readonly ScheduledDelivery[]): Promise<number> {
    const missing = await this.withoutJob(this.options.queues, page);
    const draining = missing.some((d) => d !== null) ? ((await this.options.draining?.()) ?? []) : [];
    for (const layout of draining) {
      // Runs with a job in a layout being drained are sent from there.
      const unseen = missing.filter((d) => d !== null);
      if (unseen.length === 0) break;
      const stillMissing = new Set(await this.withoutJob(layout, unseen));
      missing.forEach((d, i) => {
        if (d !== null && !stillMissing.has(d)) missing[i] = null;
      });
    }
    const now = this.now();
    const jobs: DeliverJobRequest[] = missing
      .filter((d): d is ScheduledDelivery => d !== null)
      .map((d) => ({ deliveryId: d.deliveryId, endpointId: d.endpointId, run: d.run, delayMs: Math.max(0, d.nextAttemptAt.getTime() - now) }));
    await enqueueDeliveries(this.options.queues, jobs);
    return jobs.length;
  }

  /** The deliveries (of the page, in order; null where a job exists) that have no job in their shard of `layout`. */
  private async withoutJob(layout: DeliveryQueues, page: readonly ScheduledDelivery[]): Promise<(ScheduledDelivery | null)[]> {
    const groups = layout.byShard(page);
    const without = new Set<ScheduledDelivery>();
    await Promise.all(
      [...groups].map(async ([queue, group]) => {
        const missing = await runsWithoutJob(this.options.redis, queue, group);
        group.forEach((d, i) => missing[i] && without.add(d));
      }),
    );
    return page.map((d) => (without.has(d) ? d : null));
  }
}
