/**
 * Delivery-history retention (DELIVERY_RETENTION_DAYS): deletes deliveries older than the limit
 * (their attempts go with them, ON DELETE CASCADE) and the deduplication records of events as
 * old, in bounded batches so the job never holds long locks or builds one huge transaction.
 */
import type { PrismaClient } from "@vw/db";

/** Options of {@link runRetention}. */
export interface RetentionOptions {
  retentionDays: number;
  /** Rows per DELETE statement. */
  batchSize?: number;
  /** Upper bound of batches per run; the next run continues. */
  maxBatches?: number;
  now?: Date;
}

/** Deletes what is past retention; returns how many deliveries and events went. */
export async function runRetention(prisma: PrismaClient, options: RetentionOptions): Promise<{ deliveries: number; events: number }> {
  const batchSize = options.batchSize ?? 1000;
  const maxBatches = options.maxBatches ?? 200;
  const cutoff = new Date((options.now ?? new Date()).getTime() - options.retentionDays * 86_400_000);
  let deliveries = 0;
  let events = 0;
  for (let i = 0; i < maxBatches; i += 1) {
    const n = await prisma.$executeRaw`
      DELETE FROM webhook_deliveries WHERE id IN (
        SELECT id FROM webhook_deliveries WHERE created_at < ${cutoff} ORDER BY created_at LIMIT ${batchSize})`;
    deliveries += n;
    if (n < batchSize) break;
  }
  for (let i = 0; i < maxBatches; i += 1) {
    const n = await prisma.$executeRaw`
      DELETE FROM webhook_events WHERE id IN (
        SELECT id FROM webhook_events WHERE created_at < ${cutoff} ORDER BY created_at LIMIT ${batchSize})`;
    events += n;
    if (n < batchSize) break;
  }
  return { deliveries, events };
}
