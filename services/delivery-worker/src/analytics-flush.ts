/**
 * The analytics flush: turns the per-endpoint buffers that event-ingest fills into
 * `analytics.batch` deliveries. Each run takes at most ONE batch of up to `batchMax` inner events
 * per endpoint, so an endpoint gets at most `60000 / ANALYTICS_FLUSH_INTERVAL_MS` batches a minute
 * whatever the activity (3 with the default 20 s); what does not fit waits in the bounded buffer
 * for the next run. A batch is an ordinary delivery (a `webhook_deliveries` row and a `deliver.v1`
 * job), so signing, retries, history, replay and disabling all apply to it.
 *
 * Events never sent are counted, never silent: trimmed from a full buffer (ingest side, collected
 * here), discarded because their endpoint can no longer receive analytics, or lost because the
 * batch could not be stored. The pop happens before the row is written, so analytics (an
 * experimental, best-effort stream) is at most once: a database failure loses that batch, counted.
 */
import { randomUUID } from "node:crypto";
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { PrismaClient } from "@vw/db";
import { ANALYTICS_BATCH_MAX_EVENTS } from "@vw/contracts";
import { discardAnalyticsBuffer, enqueueDeliveries, pendingAnalyticsEndpoints, popAnalyticsEvents, type DeliverJobData } from "@vw/queues";
import type { Logger } from "@vw/service-kit";
import { buildEnvelope, worldReference } from "@vw/webhook-core";
import type { WorkerMetrics } from "./metrics.js";

/** Type of the batch deliveries. */
export const ANALYTICS_BATCH_TYPE = "analytics.batch";
/** Default ANALYTICS_FLUSH_INTERVAL_MS: 3 batches per endpoint per minute at most. */
export const DEFAULT_ANALYTICS_FLUSH_INTERVAL_MS = 20_000;
/** Default ANALYTICS_BATCH_MAX, also the spec's ceiling. */
export const DEFAULT_ANALYTICS_BATCH_MAX = ANALYTICS_BATCH_MAX_EVENTS;

/** What a flush is given. */
export interface AnalyticsFlushDeps {
  redis: Redis;
  prisma: PrismaClient;
  /** The deliveries queue the batch jobs go to. */
  deliveries: Queue;
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
  /** Deliveries created, one per endpoint at most. */
  deliveryIds: string[];
  /** Inner events put in those batches. */
  events: number;
  /** Events counted as dropped during this run (all reasons). */
  dropped: number;
}

/** Why analytics events were not sent. */
export type DropReason = keyof WorkerMetrics["analyticsDropped"];

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

/** Runs one flush over every endpoint with buffered events. */
export async function flushAnalytics(deps: AnalyticsFlushDeps): Promise<AnalyticsFlushResult> {
  const result: AnalyticsFlushResult = { deliveryIds: [], events: 0, dropped: 0 };
  const ids = await pendingAnalyticsEndpoints(deps.redis, deps.keyPrefix);
  if (ids.length === 0) return result;
  const rows = await deps.prisma.$queryRaw<EndpointRow[]>`
    SELECT e.id, e.world_id, e.enabled, e.subscriptions, e.api_version,
           w.slug AS world_slug, o.slug AS org_slug, w.custom_domain, w.analytics
    FROM webhook_endpoints e JOIN worlds w ON w.id = e.world_id JOIN organizations o ON o.id = w.organization_id
    WHERE e.id = ANY(${ids}::uuid[])`;
  const byId = new Map(rows.map((row) => [row.id, row]));
  const drop = (endpointId: string, reason: DropReason, n: number): void => {
    if (n <= 0) return;
    deps.metrics.analyticsDropped[reason] += n;
    result.dropped += n;
    deps.logger.warn({ endpointId, reason, events: n }, "analytics events dropped");
  };

  const timestamp = (deps.now ?? (() => new Date()))().toISOString();
  const batches: BatchRow[] = [];
  for (const endpointId of ids) {
    const endpoint = byId.get(endpointId);
    // Re-checked at flush: an endpoint disabled, unsubscribed or deleted since its events were
    // buffered gets nothing (no catch-up), and a world that disabled analytics sends nothing.
    if (!endpoint || !endpoint.enabled || !endpoint.subscriptions.includes("analytics") || !worldAnalyticsEnabled(endpoint.analytics)) {
      const { discarded, dropped } = await discardAnalyticsBuffer(deps.redis, deps.keyPrefix, endpointId);
      drop(endpointId, "buffer-full", dropped);
      drop(endpointId, "endpoint-unavailable", discarded);
      continue;
    }
    const pop = await popAnalyticsEvents(deps.redis, deps.keyPrefix, endpointId, deps.batchMax);
    drop(endpointId, "buffer-full", pop.dropped);
    if (pop.events.length === 0) continue;
    const deliveryId = randomUUID();
    const body = buildEnvelope({
      deliveryId,
      apiVersion: endpoint.api_version,
      type: ANALYTICS_BATCH_TYPE,
      timestamp,
      world: worldReference(deps.playUrl, endpoint.org_slug, endpoint.world_slug, endpoint.custom_domain),
      data: { events: pop.events.map((text) => JSON.parse(text) as unknown) },
    });
    batches.push({ id: deliveryId, endpointId, worldId: endpoint.world_id, body, events: pop.events.length });
  }
  if (batches.length === 0) return result;

  try {
    await deps.prisma.$executeRaw`
      INSERT INTO webhook_deliveries (id, endpoint_id, world_id, type, status, body)
      SELECT id, endpoint_id, world_id, ${ANALYTICS_BATCH_TYPE}, 'pending', decode(body, 'base64')
      FROM unnest(${batches.map((b) => b.id)}::uuid[], ${batches.map((b) => b.endpointId)}::uuid[], ${batches.map((b) => b.worldId)}::uuid[],
                  ${batches.map((b) => b.body.toString("base64"))}::text[]) AS v(id, endpoint_id, world_id, body)`;
  } catch (err) {
    for (const b of batches) drop(b.endpointId, "store-failed", b.events);
    throw err;
  }
  const jobs: DeliverJobData[] = batches.map((b) => ({ deliveryId: b.id, endpointId: b.endpointId, trigger: "initial" }));
  await enqueueDeliveries(deps.deliveries, jobs);
  deps.metrics.analyticsBatches += batches.length;
  result.deliveryIds = batches.map((b) => b.id);
  result.events = batches.reduce((n, b) => n + b.events, 0);
  return result;
}

