/**
 * The maintenance run of the delivery log (the `retention.v1` job, every RETENTION_INTERVAL_MS):
 * creates the daily partitions PARTITIONS_AHEAD_DAYS ahead, then drops the partitions of the days
 * entirely past DELIVERY_RETENTION_DAYS (detached concurrently, then dropped: never row by row).
 * Both steps are idempotent and safe with many replicas (see LogPartitions in @vw/db). It runs
 * beside deliveries, never in their way: a failure fails this job only (it is logged and counted,
 * and the next run continues), and the partitions ahead leave days of margin before a missing one
 * could refuse an insert.
 */
import { LogPartitions, type DroppedPartition, type PgPool } from "@vw/db";

/** Options of {@link runRetention}. */
export interface RetentionOptions {
  retentionDays: number;
  /** Days of partitions kept ready ahead of today. */
  partitionsAheadDays: number;
  now?: Date;
}

/** What one run did, for logs and metrics. */
export interface RetentionResult {
  partitionsCreated: number;
  dropped: DroppedPartition[];
  /** Whole run (ms). */
  durationMs: number;
}

/** Creates partitions ahead and drops expired ones (see the file comment). */
export async function runRetention(pool: PgPool, options: RetentionOptions): Promise<RetentionResult> {
  const started = Date.now();
  const partitions = new LogPartitions(pool);
  const now = options.now ?? new Date();
  // Ahead first: a failure of the drop must not leave tomorrow without its partition.
  const partitionsCreated = await partitions.ensureAhead(options.partitionsAheadDays, now);
  const dropped = await partitions.dropExpired(options.retentionDays, now);
  return { partitionsCreated, dropped, durationMs: Date.now() - started };
}
