/**
 * The analytics flush: turns the per-endpoint buffers that event-ingest fills into
 * `analytics.batch` deliveries. Each run takes at most ONE batch of up to `batchMax` inner events
 * per endpoint, so an endpoint gets at most `60000 / ANALYTICS_FLUSH_INTERVAL_MS` batches a minute
 * whatever the activity (3 with the default 20 s); what does not fit waits in the bounded buffer
 * for the next run. A batch is an ordinary delivery (a pending delivery in the log, and a wake of
 * its endpoint), so signing, retries, history, replay and disabling all apply to it.
 *
 * At least once: a batch is claimed into the endpoint's in-flight record (with its deliveryId),
 * and released only after its delivery is committed. A run that fails before (the database write,
 * a crash) leaves the batch there; the next run takes that same batch again and inserts its
 * delivery if it is not there yet (its id is the deliveryId, so it cannot be doubled). Once
 * committed, the delivery is PostgreSQL's: a wake that fails is made up by the reconciler. Events never sent are counted, never silent:
 * trimmed from a full buffer (ingest side, collected here) or discarded because their endpoint can
 * no longer receive analytics.
 */
import type { DrainSignals, RedisClient } from "@vw/queues";
import { newDeliveryId, type DeliveryLog, type SqlRunner } from "@vw/db";
import { ANALYTICS_BATCH_MAX_EVENTS } from "@vw/contracts";
import { claimAnalyticsBatch, discardAnalyticsBuffer, pendingAnalyticsEndpoints, releaseAnalyticsBatch } from "@vw/queues";
import type { Logger } from "@vw/service-kit";
import { buildEnvelope, worldReference } from "@vw/webhook-core";
import type { AnalyticsDropReason, WorkerMetrics } from "./metrics.js";

/** Type of the batch deliveries. */
export const ANALYTICS_BATCH_TYPE = "analytics.batch";
/** Default ANALYTICS_FLUSH_INTERVAL_MS: 3 batches per endpoint per minute at most. */
export const DEFAULT_ANALYTICS_FLUSH_INTERVAL_MS = 20_000;
/** Default ANALYTICS_BATCH_MAX, also the spec's ceiling. */
export const DEFAULT_ANALYTICS_BATCH_MAX = ANALYTICS_BATCH_MAX_EVENTS;

/** What a flush is given. */
export interface AnalyticsFlushDeps {
  redis: RedisClient;
  /** The process's runner (the endpoints' read) and delivery log (the batches' rows). */
  sql: SqlRunner;
  log: DeliveryLog;
  /** Wakes the batches' endpoints. */
  signals: Pick<DrainSignals, "wake">;
  keyPrefix: string;
  /** PLAY_URL, for the world's `url` in the envelope. */
  playUrl: string;
  /** Inner events per batch at most (≤ 100). */
  batchMax: number;
  logger: Logger;
  metrics: WorkerMetrics;
  /** Assembly time of the batches (the outer `timestamp`); injectable for tests. */
  now?: () => Date;
}

/** What one flush did. */
export interface AnalyticsFlushResult {
  /** Deliveries stored and queued, one per endpoint at most (a held-over batch keeps its deliveryId). */
  deliveryIds: string[];
  /** Inner events put in those batches. */
  events: number;
  /** Events counted as dropped during this run (all reasons). */
  dropped: number;
}

/** Why analytics events were not sent. */
export type DropReason = AnalyticsDropReason;

interface EndpointRow {
  id: string;
  world_id: string;
  enabled: boolean;
  subscriptions: string[];
  api_version: string;
  world_slug: string;
  org_slug: string;
  custom_domain: string | null;
  analytics: unknown;
}

interface BatchRow {
  id: string;
  endpointId: string;
  worldId: string;
  body: Buffer;
  events: number;
}

/** A world's analytics are on unless its stored settings say `enabled: false` (or anything but true). */
function worldAnalyticsEnabled(stored: unknown): boolean {
  if (typeof stored !== "object" || stored === null || !("enabled" in stored)) return true;
  return (stored as { enabled: unknown }).enabled === true;
}

/** $1 endpoint ids: each with its world's slugs, domain and analytics settings. */
const FLUSH_ENDPOINTS = {
  name: "analytics-flush-endpoints",
  text: `SELECT e.id, e.world_id, e.enabled, e.subscriptions, e.api_version,
           w.slug AS world_slug, o.slug AS org_slug, w.custom_domain, w.analytics
    FROM webhook_endpoints e JOIN worlds w ON w.id = e.world_id JOIN organizations o ON o.id = w.organization_id
    WHERE e.id = ANY($1::uuid[])`,
};

/** Runs one flush over every endpoint with buffered events. */
export async function flushAnalytics(deps: AnalyticsFlushDeps): Promise<AnalyticsFlushResult> {
  const result: AnalyticsFlushResult = { deliveryIds: [], events: 0, dropped: 0 };
  const pending = await pendingAnalyticsEndpoints(deps.redis, deps.keyPrefix);
  if (pending.length === 0) return result;
  const ids = pending.map((p) => p.endpointId);
  const rows = await deps.sql.query<EndpointRow>(FLUSH_ENDPOINTS, [ids]);
  const byId = new Map(rows.map((row) => [row.id, row]));
  const drop = (endpointId: string, reason: DropReason, n: number): void => {
    if (n <= 0) return;
    deps.metrics.analyticsDropped.inc({ reason }, n);
    result.dropped += n;
    deps.logger.warn({ endpointId, reason, events: n }, "analytics events dropped");
  };

  const timestamp = (deps.now ?? (() => new Date()))().toISOString();
  const batches: BatchRow[] = [];
  for (const { worldId, endpointId } of pending) {
    const endpoint = byId.get(endpointId);
    // Re-checked at flush: an endpoint disabled, unsubscribed or deleted since its events were
    // buffered gets nothing (no catch-up), and a world that disabled analytics sends nothing.
    if (!endpoint || !endpoint.enabled || !endpoint.subscriptions.includes("analytics") || !worldAnalyticsEnabled(endpoint.analytics)) {
      const { discarded, dropped } = await discardAnalyticsBuffer(deps.redis, deps.keyPrefix, worldId, endpointId);
      drop(endpointId, "buffer-full", dropped);
      drop(endpointId, "endpoint-unavailable", discarded);
      continue;
    }
    const claim = await claimAnalyticsBatch(deps.redis, deps.keyPrefix, worldId, endpointId, deps.batchMax, newDeliveryId());
    drop(endpointId, "buffer-full", claim.dropped);
    if (claim.count === 0) continue;
    const body = buildEnvelope({
      deliveryId: claim.deliveryId,
      apiVersion: endpoint.api_version,
      type: ANALYTICS_BATCH_TYPE,
      timestamp,
      world: worldReference(deps.playUrl, endpoint.org_slug, endpoint.world_slug, endpoint.custom_domain),
      data: { events: JSON.parse(claim.eventsJson) as unknown[] },
    });
    batches.push({ id: claim.deliveryId, endpointId, worldId, body, events: claim.count });
  }
  if (batches.length === 0) return result;

  // Until the releases below, every batch stays in its endpoint's in-flight record: a failure from
  // here on fails the job and the next run sends the same batches under the same deliveryIds.
  // ON CONFLICT: a held-over batch whose row was committed before the failure keeps that row.
  try {
    const stored = await deps.log.create(
      batches.map((b) => ({ id: b.id, endpointId: b.endpointId, worldId: b.worldId, type: ANALYTICS_BATCH_TYPE, body: b.body })),
      { ignoreExisting: true },
    );
    deps.metrics.analyticsBatches.inc(stored);
  } catch (err) {
    deps.logger.warn(
      { batches: batches.length, events: batches.reduce((n, b) => n + b.events, 0), err },
      "analytics batches not stored: kept in flight for the next flush",
    );
    throw err;
  }
  await deps.signals.wake(batches.map((b) => b.endpointId)).catch((err: unknown) => deps.logger.warn({ err: err as Error }, "waking the analytics batches' endpoints failed; the reconciler's sweep will"));
  await Promise.all(batches.map((b) => releaseAnalyticsBatch(deps.redis, deps.keyPrefix, b.worldId, b.endpointId, b.id)));
  result.deliveryIds = batches.map((b) => b.id);
  result.events = batches.reduce((n, b) => n + b.events, 0);
  return result;
}
