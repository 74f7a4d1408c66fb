/**
 * Analytics intake: applies the world's privacy settings to each inner event, then appends what
 * is left to the bounded buffer of every enabled endpoint of the world subscribed to `analytics`
 * (see @vw/queues analytics-buffer). The delivery worker's flush turns the buffers into
 * `analytics.batch` deliveries, one per endpoint per flush interval at most. Nothing goes to
 * PostgreSQL here: an analytics event is worth one batch line, not a row.
 *
 * Redis holds at most ANALYTICS_BUFFER_MAX events per endpoint and ANALYTICS_BUFFER_MAX_PER_WORLD
 * (or the world's own `analyticsBufferMax`) per world, its endpoints together, and at most
 * ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD bytes of them (each event being at most
 * ANALYTICS_EVENT_MAX_BYTES, checked by the route): a world posting faster than its endpoints are
 * flushed fills its own share and no more. Events over the world's limits are not buffered; they are counted in `vw_analytics_events_dropped_total{reason=
 * "world-buffer-full"}` (one per event and endpoint, like the worker's per-endpoint drops) and
 * logged, and the request is still answered 202: analytics are best effort.
 */
import type { RedisClient } from "@vw/queues";
import type { Statement } from "@vw/db";
import type { IngestDatabase } from "./database.js";
import { DEFAULT_ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD, DEFAULT_ANALYTICS_BUFFER_MAX_PER_WORLD, pushWorldAnalyticsEvents } from "@vw/queues";
import { AppError, Counter, METRICS_PREFIX, type Logger, type Registry } from "@vw/service-kit";
import { applyPrivacy, readWorldAnalytics } from "./analytics-privacy.js";
import type { AnalyticsIntakeRequest } from "./analytics.schema.js";

/** What `POST /v1/analytics` answers. */
export interface AnalyticsIntakeResult {
  /** Events kept after the privacy rules (buffered for each subscribed endpoint). */
  accepted: number;
  /** Events dropped by the world's settings (analytics disabled, category switched off). */
  dropped: number;
  /** Endpoints the accepted events were buffered for. */
  endpoints: number;
}

/** Why ingest did not buffer analytics events (the worker counts the others under the same metric). */
export const INGEST_ANALYTICS_DROP_REASONS = ["world-buffer-full"] as const;

/** Options of {@link AnalyticsIntake}. */
export interface AnalyticsIntakeOptions {
  /** REDIS_KEY_PREFIX (the worker's must match). */
  keyPrefix: string;
  /** Secret of the per-world pseudonyms (see `pseudonymKey`). */
  pseudonymKey: Buffer;
  /** ANALYTICS_BUFFER_MAX: events waiting per endpoint at most; older ones are trimmed and counted. */
  bufferMax: number;
  /** ANALYTICS_BUFFER_MAX_PER_WORLD: events held for one world (all its endpoints) at most, unless the world has its own; 10000 by default. */
  worldBufferMax?: number;
  /** ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD: bytes of events held for one world (all its endpoints' copies) at most; 16 MiB by default. */
  worldBufferMaxBytes?: number;
  /** Where `vw_analytics_events_dropped_total` is registered (the process's `/metrics`); none: not exported. */
  registry?: Registry;
}

// Disabled endpoints are left out: they get no analytics while disabled (no catch-up).
const ANALYTICS_ENDPOINTS: Statement = {
  name: "ai-endpoints",
  text: "SELECT id FROM webhook_endpoints WHERE world_id = $1::uuid AND enabled = true AND 'analytics' = ANY(subscriptions)",
};

/** Takes validated analytics requests. */
export class AnalyticsIntake {
  private readonly dropped: Counter<"reason">;

  constructor(
    private readonly db: Pick<IngestDatabase, "sql" | "worlds">,
    private readonly redis: RedisClient,
    private readonly logger: Logger,
    private readonly options: AnalyticsIntakeOptions,
  ) {
    this.dropped = new Counter({
      name: `${METRICS_PREFIX}analytics_events_dropped_total`,
      help: "Analytics events never sent, by reason (event-ingest: world-buffer-full, one per event and endpoint).",
      labelNames: ["reason"],
      registers: options.registry ? [options.registry] : [],
    });
    for (const reason of INGEST_ANALYTICS_DROP_REASONS) this.dropped.inc({ reason }, 0);
  }

  /** Applies the privacy rules and buffers the events; 404 for an unknown world. */
  async ingest(request: AnalyticsIntakeRequest): Promise<AnalyticsIntakeResult> {
    const world = await this.db.worlds.find(request.organizationSlug, request.worldSlug);
    if (!world) {
      throw new AppError(404, "unknown-world", `No such world: ${request.world}. Nothing was accepted.`, {
        worlds: [request.world],
        errors: [{ pointer: "/world", detail: "names no known world" }],
      });
    }
    const settings = readWorldAnalytics(world.analytics);
    const kept: string[] = [];
    for (const event of request.events) {
      const processed = applyPrivacy(settings, this.options.pseudonymKey, world.id, event);
      if (processed !== null) kept.push(JSON.stringify(processed));
    }
    const result = { accepted: kept.length, dropped: request.events.length - kept.length, endpoints: 0 };
    if (kept.length === 0) return result;

    const endpoints = await this.db.sql.query<{ id: string }>(ANALYTICS_ENDPOINTS, [world.id]);
    const worldMax = world.analyticsBufferMax ?? this.options.worldBufferMax ?? DEFAULT_ANALYTICS_BUFFER_MAX_PER_WORLD;
    const pushed = await pushWorldAnalyticsEvents(
      this.redis,
      this.options.keyPrefix,
      world.id,
      endpoints.map((e) => e.id),
      kept,
      { perEndpointMax: this.options.bufferMax, worldMax, worldMaxBytes: this.options.worldBufferMaxBytes ?? DEFAULT_ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD },
    );
    for (const [endpointId, trimmed] of pushed.trimmed) {
      this.logger.warn({ endpointId, trimmed, bufferMax: this.options.bufferMax }, "analytics buffer full: oldest events dropped");
    }
    if (pushed.refused > 0) {
      this.dropped.inc({ reason: "world-buffer-full" }, pushed.refused);
      this.logger.warn(
        { worldId: world.id, refused: pushed.refused, worldBufferMax: worldMax, worldBufferMaxBytes: this.options.worldBufferMaxBytes ?? DEFAULT_ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD },
        "analytics: the world's buffer is full; events not buffered",
      );
    }
    result.endpoints = endpoints.length;
    return result;
  }
}
