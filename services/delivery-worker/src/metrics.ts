/**
 * The worker's Prometheus metrics, registered on the process registry that `/metrics` serves
 * (service-kit `createServiceMetrics`). Counters are incremented on the hot path (one map lookup
 * each); queue depths and the age of the oldest waiting job are read from Redis at scrape time.
 * No label names an endpoint or a world: their number is unbounded.
 */
import type { Queue } from "bullmq";
import { Counter, Gauge, Histogram, METRICS_PREFIX, type Registry } from "@vw/service-kit";
import type { AttemptVerdict } from "@vw/webhook-core";

const VERDICTS: readonly AttemptVerdict[] = ["delivered", "retry", "gone", "rejected"];

/** Why analytics events were never sent (buffer-full: trimmed from a full per-endpoint buffer). */
export const ANALYTICS_DROP_REASONS = ["buffer-full", "endpoint-unavailable"] as const;
/** One of {@link ANALYTICS_DROP_REASONS}. */
export type AnalyticsDropReason = (typeof ANALYTICS_DROP_REASONS)[number];

/** Why the worker disabled an endpoint: a 410 answer, or DISABLE_AFTER_FAILURES consecutive failures. */
export type EndpointDisableReason = "gone" | "failures";

/** Job states counted per queue in `vw_queue_jobs`. */
const QUEUE_STATES = ["waiting", "active", "delayed", "prioritized", "failed"] as const;

/** Upper bounds (seconds) of the attempt-duration histogram (DELIVERY_TIMEOUT_MS is 15 s by default). */
const ATTEMPT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30];
/**
 * Upper bounds (seconds) of the lag histograms: sub-second when all is well, then the retry
 * schedule's steps (5 s, 5 min, 30 min, 2 h, ... 24 h) and beyond, for success after retries.
 */
const LAG_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 43200, 86400, 259200];

/** The metrics of one worker process. */
export class WorkerMetrics {
  /** `vw_delivery_attempts_total{verdict}`. */
  readonly attempts: Counter<"verdict">;
  /** `vw_delivery_attempt_duration_seconds`: from connect to the answer (or the error). */
  readonly attemptDuration: Histogram;
  /** `vw_delivery_first_attempt_lag_seconds`: event accepted by event-ingest → first attempt started. */
  readonly firstAttemptLag: Histogram;
  /** `vw_delivery_success_lag_seconds`: event accepted → the attempt that succeeded (retries included). */
  readonly successLag: Histogram;
  /** `vw_delivery_endpoints_slowed{reason}`: endpoints this process sends to whose window is below its largest size. */
  readonly endpointsSlowed: Gauge<"reason">;
  /** `vw_delivery_skipped_total`: deliveries not sent (endpoint disabled or deleted). */
  readonly skipped: Counter;
  /** `vw_endpoints_disabled_total{reason}`. */
  readonly endpointsDisabled: Counter<"reason">;
  /** `vw_admin_mails_sent_total`. */
  readonly mailsSent: Counter;
  /** `vw_log_partitions_created_total`: daily delivery-log partitions created ahead by the retention job. */
  readonly partitionsCreated: Counter;
  /** `vw_log_partitions_dropped_total`: expired delivery-log partitions detached and dropped. */
  readonly partitionsDropped: Counter;
  /** `vw_retention_failures_total`: retention runs that failed (deliveries are not affected). */
  readonly retentionFailures: Counter;
  /** `vw_retention_last_run_seconds`: duration of the last retention run. */
  readonly retentionLastRun: Gauge;
  /** `vw_retention_last_partition_drop_seconds`: longest detach + drop of one partition in the last run. */
  readonly retentionLastPartitionDrop: Gauge;
  /** `vw_analytics_batches_total`: `analytics.batch` deliveries created by the flush. */
  readonly analyticsBatches: Counter;
  /** `vw_analytics_events_dropped_total{reason}`. */
  readonly analyticsDropped: Counter<"reason">;
  /** `vw_deliveries_reconciled_total{reason}`: endpoints woken from PostgreSQL (rebuild: Redis lost its data; sweep: one with due deliveries had no drain). */
  readonly reconciled: Counter<"reason">;
  /** `vw_delivery_platform_failures_total`: runs that could not be attempted for the platform's reason (a dependency down); no attempt spent. */
  readonly platformFailures: Counter;

  constructor(readonly registry: Registry) {
    const registers = [registry];
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> =>
      new Counter<L>({ name: `${METRICS_PREFIX}${name}`, help, labelNames, registers });
    const histogram = (name: string, help: string, buckets: number[]): Histogram =>
      new Histogram({ name: `${METRICS_PREFIX}${name}`, help, buckets, registers });

    this.attempts = counter("delivery_attempts_total", "Delivery attempts by verdict (delivered, retry, gone, rejected).", ["verdict"]);
    this.attemptDuration = histogram("delivery_attempt_duration_seconds", "Duration of delivery attempts, connect to answer or error.", ATTEMPT_BUCKETS);
    this.firstAttemptLag = histogram(
      "delivery_first_attempt_lag_seconds",
      "From the event's acceptance by event-ingest to the start of its delivery's first attempt (replays and tests excluded).",
      LAG_BUCKETS,
    );
    this.successLag = histogram(
      "delivery_success_lag_seconds",
      "From the event's acceptance by event-ingest to the attempt that delivered it, retries included (replays and tests excluded).",
      LAG_BUCKETS,
    );
    this.endpointsSlowed = new Gauge({
      name: `${METRICS_PREFIX}delivery_endpoints_slowed`,
      help: "Endpoints this process drained lately whose window of attempts in flight is below its largest size, by reason (throttled: 429 or 503; unresponsive: timeouts or failed connections). Sum over replicas.",
      labelNames: ["reason"] as const,
      registers,
    });
    this.skipped = counter("delivery_skipped_total", "Deliveries not sent: endpoint disabled or deleted.");
    this.endpointsDisabled = counter("endpoints_disabled_total", "Endpoints disabled by the worker, by reason (gone: a 410 answer; failures: consecutive failures).", ["reason"]);
    this.mailsSent = counter("admin_mails_sent_total", "Endpoint-disabled mails sent.");
    this.partitionsCreated = counter("log_partitions_created_total", "Daily delivery-log partitions created ahead by the retention job.");
    this.partitionsDropped = counter("log_partitions_dropped_total", "Expired delivery-log partitions detached and dropped.");
    this.retentionFailures = counter("retention_failures_total", "Retention runs that failed (deliveries are not affected).");
    this.retentionLastRun = new Gauge({ name: `${METRICS_PREFIX}retention_last_run_seconds`, help: "Duration of the last retention run.", registers });
    this.retentionLastPartitionDrop = new Gauge({
      name: `${METRICS_PREFIX}retention_last_partition_drop_seconds`,
      help: "Longest detach and drop of one partition in the last retention run (0 when none was dropped).",
      registers,
    });
    this.analyticsBatches = counter("analytics_batches_total", "analytics.batch deliveries created by the flush.");
    this.analyticsDropped = counter("analytics_events_dropped_total", "Analytics events never sent, by reason.", ["reason"]);
    this.reconciled = counter(
      "deliveries_reconciled_total",
      "Endpoints woken from PostgreSQL, the schedule of record (rebuild: Redis lost the queue's data; sweep: an endpoint with due deliveries had no drain).",
      ["reason"],
    );
    this.platformFailures = counter(
      "delivery_platform_failures_total",
      "Delivery runs that could not be attempted because of the platform (PostgreSQL or Redis unavailable): retried without spending an attempt.",
    );

    // Every known label value exists from the start at 0, so rate() and alerts see the first increase.
    for (const verdict of VERDICTS) this.attempts.inc({ verdict }, 0);
    for (const reason of ["gone", "failures"] as const) this.endpointsDisabled.inc({ reason }, 0);
    for (const reason of ANALYTICS_DROP_REASONS) this.analyticsDropped.inc({ reason }, 0);
    for (const reason of ["rebuild", "sweep"] as const) this.reconciled.inc({ reason }, 0);
    for (const reason of ["throttled", "unresponsive"] as const) this.endpointsSlowed.set({ reason }, 0);
  }

  /** Records one retention run (retention.ts): partitions created and dropped, and how long it took. */
  observeRetention(run: { partitionsCreated: number; dropped: readonly { detachMs: number; dropMs: number }[]; durationMs: number }): void {
    this.partitionsCreated.inc(run.partitionsCreated);
    this.partitionsDropped.inc(run.dropped.length);
    this.retentionLastRun.set(run.durationMs / 1000);
    this.retentionLastPartitionDrop.set(run.dropped.reduce((max, d) => Math.max(max, d.detachMs + d.dropMs), 0) / 1000);
  }

  /** Counts an attempt and its duration. */
  observeAttempt(verdict: AttemptVerdict, durationMs: number): void {
    this.attempts.inc({ verdict });
    this.attemptDuration.observe(durationMs / 1000);
  }

  /**
   * Serves, read at scrape time: the depth of each queue per state (`vw_queue_jobs{queue,state}`;
   * for the deliveries queue these are drains, and `delayed` counts retry timers), the age of each
   * queue's oldest waiting job (`vw_queue_oldest_waiting_seconds{queue}`), and from PostgreSQL's
   * schedule of record the backlog: endpoints whose earliest pending delivery has been due longer
   * than {@link BACKLOG_AFTER_MS}, and how long it has been due. Every replica reports the same
   * figures: aggregate them with max(), not sum().
   */
  watchQueues(queues: readonly Queue[], backlog: () => Promise<BacklogFigures>, now: () => number = Date.now): void {
    const registers = [this.registry];
    // One read of the backlog per scrape, shared by the gauges that need it.
    let pending: Promise<BacklogFigures> | null = null;
    const figures = (): Promise<BacklogFigures> => {
      pending ??= backlog().finally(() => setImmediate(() => (pending = null)));
      return pending;
    };
    new Gauge({
      name: `${METRICS_PREFIX}queue_jobs`,
      help: "Jobs per queue and state, read from Redis at scrape time (for webhook-deliveries: endpoint drains, and retry timers as delayed).",
      labelNames: ["queue", "state"] as const,
      registers,
      async collect() {
        const counts = await Promise.all(queues.map((q) => q.getJobCounts(...QUEUE_STATES)));
        // The shards of the deliveries queue share its name: their figures are summed under it.
        const sums = new Map<string, Map<string, number>>();
        queues.forEach((q, i) => {
          let byState = sums.get(q.name);
          if (!byState) sums.set(q.name, (byState = new Map()));
          for (const state of QUEUE_STATES) byState.set(state, (byState.get(state) ?? 0) + (counts[i]?.[state] ?? 0));
        });
        this.reset();
        for (const [name, byState] of sums) for (const [state, n] of byState) this.set({ queue: name, state }, n);
      },
    });
    new Gauge({
      name: `${METRICS_PREFIX}queue_oldest_waiting_seconds`,
      help: "Age of the oldest job ready to run but not yet taken (0 when none waits), per queue (the oldest of its shards).",
      labelNames: ["queue"] as const,
      registers,
      async collect() {
        const ages = await Promise.all(queues.map((q) => oldestWaitingAgeSeconds(q, now())));
        const oldest = new Map<string, number>();
        queues.forEach((q, i) => oldest.set(q.name, Math.max(oldest.get(q.name) ?? 0, ages[i] ?? 0)));
        this.reset();
        for (const [name, age] of oldest) this.set({ queue: name }, age);
      },
    });
    new Gauge({
      name: `${METRICS_PREFIX}delivery_backlog_endpoints`,
      help: "Endpoints whose earliest pending delivery has been due for more than 5 seconds (PostgreSQL's schedule of record).",
      registers,
      async collect() {
        this.set((await figures()).backloggedEndpoints);
      },
    });
    new Gauge({
      name: `${METRICS_PREFIX}delivery_backlog_oldest_age_seconds`,
      help: "How long the longest-due pending delivery has been due (0 without a backlog).",
      registers,
      async collect() {
        this.set((await figures()).oldestDueAgeSeconds);
      },
    });
  }
}

/** A pending delivery due for longer than this makes its endpoint count as backlogged. */
export const BACKLOG_AFTER_MS = 5000;

/** The backlog as the schedule of record shows it (see {@link WorkerMetrics.watchQueues}). */
export interface BacklogFigures {
  backloggedEndpoints: number;
  oldestDueAgeSeconds: number;
}

/** The backlog figures of the endpoints' earliest due times, at `nowMs`. */
export function backlogOf(due: readonly { dueAt: Date }[], nowMs: number): BacklogFigures {
  let backloggedEndpoints = 0;
  let oldest = 0;
  for (const { dueAt } of due) {
    const age = nowMs - dueAt.getTime();
    if (age > BACKLOG_AFTER_MS) backloggedEndpoints += 1;
    oldest = Math.max(oldest, age);
  }
  return { backloggedEndpoints, oldestDueAgeSeconds: Math.max(0, oldest) / 1000 };
}

/**
 * Seconds since the oldest job of the wait list became ready: the list is pushed on the left and
 * taken from the right, so its last element has waited longest. A job that came back from the
 * delayed set (a retry, a deferral) became ready at its last run plus its delay, not when created.
 */
async function oldestWaitingAgeSeconds(queue: Queue, nowMs: number): Promise<number> {
  const [job] = await queue.getJobs(["wait"], -1, -1);
  if (!job) return 0;
  const readyAt = (job.processedOn ?? job.timestamp) + (job.delay ?? 0);
  return Math.max(0, (nowMs - readyAt) / 1000);
}
