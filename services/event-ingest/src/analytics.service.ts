/**
 * Analytics intake: applies the world's privacy settings to each inner event, then appends what
 * is left to the bounded buffer of every enabled endpoint of the world subscribed to `analytics`
 * (see @vw/queues analytics-buffer). The delivery worker's flush turns the buffers into
 * `analytics.batch` deliveries, one per endpoint per flush interval at most. Nothing goes to
 * PostgreSQL here: an analytics event is worth one batch line, not a row.
 */
import type { RedisClient } from "@vw/queues";
import type { PrismaClient } from "@vw/db";
import { pushAnalyticsEvents } from "@vw/queues";
import { AppError, type Logger } from "@vw/service-kit";
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

/** Options of {@link AnalyticsIntake}. */
export interface AnalyticsIntakeOptions {
  /** REDIS_KEY_PREFIX (the worker's must match). */
  keyPrefix: string;
  /** Secret of the per-world pseudonyms (see `pseudonymKey`). */
  pseudonymKey: Buffer;
  /** ANALYTICS_BUFFER_MAX: events waiting per endpoint at most; older ones are trimmed and counted. */
  bufferMax: number;
}

interface WorldRow {
  id: string;
  analytics: unknown;
}

/** Takes validated analytics requests. */
export class AnalyticsIntake {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly redis: RedisClient,
    private readonly logger: Logger,
    private readonly options: AnalyticsIntakeOptions,
  ) {}

  /** Applies the privacy rules and buffers the events; 404 for an unknown world. */
  async ingest(request: AnalyticsIntakeRequest): Promise<AnalyticsIntakeResult> {
    const [world] = await this.prisma.$queryRaw<WorldRow[]>`
      SELECT w.id, w.analytics FROM worlds w JOIN organizations o ON o.id = w.organization_id
      WHERE o.slug = ${request.organizationSlug} AND w.slug = ${request.worldSlug}`;
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

    // Disabled endpoints are left out: they get no analytics while disabled (no catch-up).
    const endpoints = await this.prisma.$queryRaw<{ id: string }[]>`
      SELECT id FROM webhook_endpoints WHERE world_id = ${world.id}::uuid AND enabled = true AND 'analytics' = ANY(subscriptions)`;
    for (const endpoint of endpoints) {
      const trimmed = await pushAnalyticsEvents(this.redis, this.options.keyPrefix, endpoint.id, kept, this.options.bufferMax);
      if (trimmed > 0) {
        this.logger.warn({ endpointId: endpoint.id, trimmed, bufferMax: this.options.bufferMax }, "analytics buffer full: oldest events dropped");
      }
    }
    result.endpoints = endpoints.length;
    return result;
  }
}
