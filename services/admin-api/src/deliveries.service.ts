import type {
  DeliveryHistory,
  DeliveryLog,
  DeliveryFilter,
  DeliverySummary,
  EndpointStatsSummary,
} from "@vw/db";
import type { AttemptRecord } from "@vw/webhook-core";
import { AppError, notFound, withSpan, withTimeout, type Logger } from "@vw/service-kit";
import type { AttemptResource, DeliveryResource, DeliverySummaryResource, EndpointStatsResource, ListResource, SendingWindowResource, WorldStatsResource } from "@vw/contracts";
import type { DrainSignals } from "@vw/queues";
import type { EndpointsService } from "./endpoints.service.js";
import { badCursor, isUuid, type PageRequest } from "./http-support.js";

/** A page request of the delivery list, with its optional filters. */
export interface DeliveryPageRequest extends PageRequest {
  filter: DeliveryFilter;
}

/**
 * Delivery history of one endpoint (filtered list, one delivery with every attempt, 24 h stats)
 * and Replay, through the DeliveryLog of @vw/db (the one owner of the history tables): reads from
 * its DeliveryHistory, Replay through its requeue and a wake of the endpoint.
 */
export class DeliveriesService {
  constructor(
    private readonly log: DeliveryLog,
    private readonly history: DeliveryHistory,
    private readonly endpoints: EndpointsService,
    private readonly signals: Pick<DrainSignals, "wake" | "loadWindow">,
    private readonly logger: Logger,
    /** How long Replay waits for Redis to take the wake (a producer connection waits for a reconnection). */
    private readonly enqueueTimeoutMs = DEFAULT_ENQUEUE_TIMEOUT_MS,
  ) {}

  /**
   * Deliveries of the endpoint matching the filters, newest first (`created_at` desc, then id
   * desc). Keyset pagination on (created_at, id) read from the cursor's row: unlike an offset past
   * the cursor, it neither skips nor repeats a row when the cursor's delivery changes status
   * between two pages (a pending delivery gets delivered while the list is read).
   */
  async list(organizationSlug: string, worldSlug: string, endpointId: string, page: DeliveryPageRequest): Promise<ListResource<DeliverySummaryResource>> {
    const endpoint = await this.endpoints.find(organizationSlug, worldSlug, endpointId);
    const rows = await this.history.list(endpoint.id, page.filter, { limit: page.limit + 1, ...(page.cursor === undefined ? {} : { after: page.cursor }) });
    if (rows === null) {
      // A cursor of another endpoint, or of a delivery removed by retention since.
      throw badCursor();
    }
    const items = rows.slice(0, page.limit);
    const last = items.at(-1);
    return { items: items.map(toDeliverySummary), nextCursor: rows.length > page.limit && last ? last.id : null };
  }

  /** One delivery of the endpoint with its body and every attempt, oldest first; 404 otherwise. */
  async get(organizationSlug: string, worldSlug: string, endpointId: string, deliveryId: string): Promise<DeliveryResource> {
    const endpoint = await this.endpoints.find(organizationSlug, worldSlug, endpointId);
    if (!isUuid(deliveryId)) throw deliveryNotFound(endpoint.id, deliveryId);
    const row = await this.history.get(endpoint.id, deliveryId);
    if (!row) throw deliveryNotFound(endpoint.id, deliveryId);
    const body = row.body.toString("utf8");
    return { ...toDeliverySummary(row), body, attempts: row.attempts.map((attempt) => toAttemptResource(attempt, body)) };
  }

  /**
   * The endpoint's figures over the last 24 h (see EndpointStatsResource), from the rollup kept as
   * attempts are recorded, with its sending window as its last drain left it (left out when Redis
   * does not answer in time: the figures do not wait for it).
   */
  async stats(organizationSlug: string, worldSlug: string, endpointId: string): Promise<EndpointStatsResource> {
    const endpoint = await this.endpoints.find(organizationSlug, worldSlug, endpointId);
    const window = withTimeout(this.signals.loadWindow(endpoint.id), this.enqueueTimeoutMs, "window").catch((err: unknown) => {
      this.logger.debug({ err: err as Error, endpointId: endpoint.id }, "the endpoint's sending window could not be read");
      return null;
    });
    const [stats, stored] = await Promise.all([this.history.stats(endpoint.id), window]);
    return { ...toStatsResource(stats), ...(stored === null ? {} : { sendingWindow: toSendingWindow(stored) }) };
  }

  /** The figures of every endpoint of the world together, over the last 24 h (one read of the rollup). */
  async worldStats(organizationSlug: string, worldSlug: string): Promise<WorldStatsResource> {
    return toStatsResource(await this.history.stats(await this.endpoints.idsOf(organizationSlug, worldSlug)));
  }

  /**
   * Queues a past delivery again: same `deliveryId`, and the worker sends the stored bytes, so the
   * body is byte-identical (only the signature headers are new, for the new timestamp).
   *
   * Refused with 409 `endpoint-disabled` while the endpoint is disabled (this project's choice:
   * a disabled endpoint receives nothing; re-enable it first). The check is part of the UPDATE
   * itself, so a disable landing at the same moment cannot be overtaken. Once the delivery is
   * pending again, PostgreSQL owes it: the endpoint is woken at once, and should that fail (Redis
   * down, or not answering within `enqueueTimeoutMs`), the worker's reconciler wakes it within
   * RECONCILE_INTERVAL_MS; the Replay is accepted either way.
   */
  replay(organizationSlug: string, worldSlug: string, endpointId: string, deliveryId: string): Promise<DeliverySummaryResource> {
    return withSpan("delivery replay", { "webhook.endpoint_id": endpointId, "webhook.delivery_id": deliveryId }, () => this.replayUntraced(organizationSlug, worldSlug, endpointId, deliveryId));
  }

  private async replayUntraced(organizationSlug: string, worldSlug: string, endpointId: string, deliveryId: string): Promise<DeliverySummaryResource> {
    const endpoint = await this.endpoints.find(organizationSlug, worldSlug, endpointId);
    if (!isUuid(deliveryId)) throw deliveryNotFound(endpoint.id, deliveryId);
    const before = await this.history.find(endpoint.id, deliveryId);
    if (!before) throw deliveryNotFound(endpoint.id, deliveryId);

    const [requeued] = await this.log.requeue(endpoint.id, [before.id]);
    if (requeued === undefined) {
      // The delivery exists (read above), so its endpoint is disabled, or was deleted meanwhile.
      const current = await this.endpoints.find(organizationSlug, worldSlug, endpointId).catch(() => null);
      if (!current) throw deliveryNotFound(endpoint.id, deliveryId);
      throw endpointDisabled("replays");
    }

    const woken = this.signals.wake([endpoint.id]);
    await withTimeout(woken, this.enqueueTimeoutMs, ENQUEUE_TIMEOUT_MESSAGE).catch((err: unknown) => {
      woken.catch(() => undefined); // settled or not, nobody waits for it any more
      this.logger.warn({ err: err as Error, endpointId: endpoint.id, deliveryId }, "replay: waking the endpoint failed; the worker's reconciler will");
    });
    const row = await this.history.find(endpoint.id, before.id);
    if (!row) throw deliveryNotFound(endpoint.id, deliveryId);
    return toDeliverySummary(row);
  }
}

/** Default of {@link DeliveriesService}'s `enqueueTimeoutMs`. */
export const DEFAULT_ENQUEUE_TIMEOUT_MS = 5000;
const ENQUEUE_TIMEOUT_MESSAGE = "Redis did not take the replay's wake in time";

/** 409 for an action that would send to a disabled endpoint (`what`: "replays", "recovers"). */
export function endpointDisabled(what: string): AppError {
  return new AppError(409, "endpoint-disabled", `This endpoint is disabled, and a disabled endpoint receives nothing, ${what} included. Enable it with POST .../enable, then try again.`);
}

function deliveryNotFound(endpointId: string, deliveryId: string): AppError {
  return notFound(`Webhook endpoint "${endpointId}" has no delivery "${deliveryId}".`);
}

/** A delivery as the list shows it. */
export function toDeliverySummary(row: DeliverySummary): DeliverySummaryResource {
  return {
    deliveryId: row.id,
    endpointId: row.endpointId,
    type: row.type,
    test: row.test,
    status: row.status,
    attemptCount: row.attemptCount,
    lastStatus: row.lastStatus,
    nextAttemptAt: row.nextAttemptAt?.toISOString() ?? null,
    ...(row.status === "pending" && row.waitReason !== null ? { nextAttemptReason: row.waitReason } : {}),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    ...(row.eventId === null ? {} : { eventId: row.eventId }),
  };
}

/** One attempt as sent and answered; `requestBody` is the delivery's body (the same on every attempt). */
export function toAttemptResource(row: AttemptRecord, requestBody: string): AttemptResource {
  return {
    attemptId: row.id,
    attemptNumber: row.attemptNumber,
    trigger: row.trigger,
    startedAt: row.startedAt.toISOString(),
    requestHeaders: row.requestHeaders,
    requestBody,
    responseStatus: row.responseStatus,
    responseHeaders: row.responseHeaders,
    responseBody: row.responseBody,
    responseBodyTruncated: row.responseBodyTruncated,
    durationMs: row.durationMs,
    errorKind: row.errorKind,
    error: row.error,
    verdict: row.verdict,
  };
}

/** A drain's stored window as the API shows it. */
function toSendingWindow(w: { size: number; max: number; reason: "throttled" | "unresponsive" | null; since: number | null }): SendingWindowResource {
  const slowedDown = w.size < w.max;
  return { size: w.size, max: w.max, slowedDown, reason: slowedDown ? w.reason : null, since: slowedDown && w.since !== null ? new Date(w.since).toISOString() : null };
}

function toStatsResource(s: EndpointStatsSummary): EndpointStatsResource {
  return {
    since: s.since.toISOString(),
    until: s.until.toISOString(),
    deliveries: s.deliveries,
    attempts: s.attempts,
    successRate: s.successRate,
    latencyMs: s.latencyMs,
    lastAttempt: s.lastAttempt === null ? null : { at: s.lastAttempt.at.toISOString(), status: s.lastAttempt.status, outcome: s.lastAttempt.outcome },
    attemptsByHour: s.attemptsByHour.map((h) => ({ hour: h.hour.toISOString(), succeeded: h.succeeded, failed: h.failed })),
  };
}
