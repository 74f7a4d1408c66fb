/**
 * Counters of this worker process, served in the Prometheus text format on `/metrics` with the
 * queue depths read from Redis at scrape time (the operator's view of the queues).
 */
import type { BacklogStats } from "@vw/queues";
import type { AttemptVerdict } from "@vw/webhook-core";

/** Upper bounds (ms) of the attempt-duration histogram. */
const DURATION_BUCKETS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 15000, 30000];

/** In-process counters; plain fields so the hot path pays one increment. */
export class WorkerMetrics {
  attempts: Record<AttemptVerdict, number> = { delivered: 0, retry: 0, gone: 0, rejected: 0 };
  /** Jobs that found their endpoint's window full and were parked (nothing sent). */
  parked = 0;
  skipped = 0;
  endpointsDisabled = 0;
  mailsSent = 0;
  /** Delivery-log maintenance (retention.ts): partitions created and dropped, failed runs, last run. */
  partitionsCreated = 0;
  partitionsDropped = 0;
  retentionFailures = 0;
  retentionLastDurationMs = 0;
  retentionLastDetachMs = 0;
  /** `analytics.batch` deliveries created by the flush. */
  analyticsBatches = 0;
  /** Analytics events never sent, by reason (buffer-full: trimmed from a full per-endpoint buffer). */
  analyticsDropped: Record<"buffer-full" | "endpoint-unavailable", number> = {
    "buffer-full": 0,
    "endpoint-unavailable": 0,
  };
  private readonly buckets = new Array<number>(DURATION_BUCKETS.length).fill(0);
  private durationSum = 0;
  private durationCount = 0;

  observeRetention(run: { partitionsCreated: number; dropped: readonly { detachMs: number; dropMs: number }[]; durationMs: number }): void {
    this.partitionsCreated += run.partitionsCreated;
    this.partitionsDropped += run.dropped.length;
    this.retentionLastDurationMs = run.durationMs;
    this.retentionLastDetachMs = run.dropped.reduce((max, d) => Math.max(max, d.detachMs + d.dropMs), 0);
  }

  observeAttempt(verdict: AttemptVerdict, durationMs: number): void {
    this.attempts[verdict] += 1;
    this.durationSum += durationMs;
    this.durationCount += 1;
    for (let i = 0; i < DURATION_BUCKETS.length; i += 1) {
      if (durationMs <= (DURATION_BUCKETS[i] as number)) this.buckets[i] = (this.buckets[i] as number) + 1;
    }
  }

  /** The Prometheus exposition text, with queue depths given by the caller. */
  render(queues: Record<string, Record<string, number>>, backlog?: BacklogStats): string {
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, samples: [string, number][]): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
    };
    metric(
      "vw_delivery_attempts_total",
      "counter",
      "Delivery attempts by verdict.",
      Object.entries(this.attempts).map(([verdict, n]) => [`{verdict="${verdict}"}`, n]),
    );
    metric("vw_delivery_parked_total", "counter", "Jobs parked because their endpoint had every slot of its window taken.", [["", this.parked]]);
    metric("vw_delivery_skipped_total", "counter", "Deliveries not sent: endpoint disabled or deleted.", [["", this.skipped]]);
    metric("vw_endpoints_disabled_total", "counter", "Endpoints disabled by this worker (410 or consecutive failures).", [["", this.endpointsDisabled]]);
    metric("vw_admin_mails_sent_total", "counter", "Endpoint-disabled mails sent.", [["", this.mailsSent]]);
    metric("vw_log_partitions_created_total", "counter", "Daily delivery-log partitions created ahead by the retention job.", [["", this.partitionsCreated]]);
    metric("vw_log_partitions_dropped_total", "counter", "Expired delivery-log partitions detached and dropped.", [["", this.partitionsDropped]]);
    metric("vw_retention_failures_total", "counter", "Retention runs that failed (deliveries are not affected).", [["", this.retentionFailures]]);
    metric("vw_retention_last_run_ms", "gauge", "Duration of the last retention run.", [["", this.retentionLastDurationMs]]);
    metric("vw_retention_last_partition_drop_ms", "gauge", "Longest detach+drop of one partition in the last run.", [["", this.retentionLastDetachMs]]);
    metric("vw_analytics_batches_total", "counter", "analytics.batch deliveries created by the flush.", [["", this.analyticsBatches]]);
    metric(
      "vw_analytics_events_dropped_total",
      "counter",
      "Analytics events never sent, by reason.",
      Object.entries(this.analyticsDropped).map(([reason, n]) => [`{reason="${reason}"}`, n]),
    );
    lines.push("# HELP vw_delivery_attempt_duration_ms Duration of delivery attempts.", "# TYPE vw_delivery_attempt_duration_ms histogram");
    DURATION_BUCKETS.forEach((bound, i) => lines.push(`vw_delivery_attempt_duration_ms_bucket{le="${bound}"} ${this.buckets[i]}`));
    lines.push(`vw_delivery_attempt_duration_ms_bucket{le="+Inf"} ${this.durationCount}`);
    lines.push(`vw_delivery_attempt_duration_ms_sum ${this.durationSum}`, `vw_delivery_attempt_duration_ms_count ${this.durationCount}`);
    const depth: [string, number][] = [];
    for (const [queue, counts] of Object.entries(queues)) {
      for (const [state, n] of Object.entries(counts)) depth.push([`{queue="${queue}",state="${state}"}`, n]);
    }
    metric("vw_queue_jobs", "gauge", "Jobs per queue and state.", depth);
    if (backlog) {
      metric("vw_delivery_backlog_endpoints", "gauge", "Endpoints with deliveries parked waiting for a slot.", [["", backlog.backloggedEndpoints]]);
      metric("vw_delivery_backlog_oldest_age_seconds", "gauge", "Age of the oldest delivery parked waiting for a slot.", [["", backlog.oldestParkedAgeSeconds]]);
    }
    return `${lines.join("\n")}\n`;
  }
}
