import type { DeliveryHistory, DeliveryRecoveries, DeliveryRecovery } from "@vw/db";
import { AppError, notFound, withSpan, withTimeout } from "@vw/service-kit";
import type { RecoverPreviewResource, RecoverRequest, RecoveryResource, RecoveryStatus } from "@vw/contracts";
import { enqueueRecovery } from "@vw/queues";
import type { Queue } from "bullmq";
import { DEFAULT_ENQUEUE_TIMEOUT_MS, endpointDisabled } from "./deliveries.service.js";
import type { EndpointsService } from "./endpoints.service.js";
import { isUuid } from "./http-support.js";

/** The status every recover counts and queues again. */
const FAILED = "failed" as const;

/**
 * Recover (Svix's recover, Convoy's batch retry): every failed delivery of an endpoint created in
 * a window, sent again with its deliveryId and stored bytes. The dry run counts; the real one is
 * recorded as a recovery and run by the delivery worker's `recover.v1` job, which re-queues the
 * deliveries batch by batch through Replay's path (`DeliveryLog.requeue` of @vw/db) and records
 * its progress, read back here.
 */
export class RecoveriesService {
  constructor(
    private readonly recoveries: DeliveryRecoveries,
    private readonly history: DeliveryHistory,
    private readonly endpoints: EndpointsService,
    private readonly recoveryQueue: Queue,
    private readonly options: { now: () => Date; enqueueTimeoutMs?: number },
  ) {}

  /**
   * Counts (dry run) or starts a recover. The window ends at `until`, or now: fixed when asked,
   * so deliveries failing later are not swept in by a job that runs late. A real recover of a
   * disabled endpoint is 409, like Replay (the dry run still counts, to preview before enabling).
   */
  recover(organizationSlug: string, worldSlug: string, endpointId: string, request: RecoverRequest): Promise<RecoverPreviewResource | RecoveryResource> {
    return withSpan("endpoint recover", { "webhook.endpoint_id": endpointId, "webhook.recover.dry_run": request.dryRun === true }, () =>
      this.recoverUntraced(organizationSlug, worldSlug, endpointId, request),
    );
  }

  private async recoverUntraced(organizationSlug: string, worldSlug: string, endpointId: string, request: RecoverRequest): Promise<RecoverPreviewResource | RecoveryResource> {
    const endpoint = await this.endpoints.find(organizationSlug, worldSlug, endpointId);
    const window = { since: new Date(request.since), until: request.until === undefined ? this.options.now() : new Date(request.until) };
    if (window.until.getTime() <= window.since.getTime()) {
      throw new AppError(400, "invalid-request", "The window is empty: since must be before until (now when until is not given).", {
        errors: [{ pointer: "/since", detail: "must be before until (now when until is not given)" }],
      });
    }
    const count = await this.history.countInWindow(endpoint.id, FAILED, window);
    if (request.dryRun === true) return { count };
    if (!endpoint.enabled) throw endpointDisabled("recovers");

    const recovery = await this.recoveries.create({ endpointId: endpoint.id, ...window, total: count });
    const enqueued = enqueueRecovery(this.recoveryQueue, { recoveryId: recovery.id });
    try {
      await withTimeout(enqueued, this.options.enqueueTimeoutMs ?? DEFAULT_ENQUEUE_TIMEOUT_MS, "Redis did not take the recover job in time");
    } catch (err) {
      enqueued.catch(() => undefined);
      await this.recoveries.finish(recovery.id, "failed", "The recover job could not be queued (Redis unavailable); nothing was sent again.").catch(() => undefined);
      throw new AppError(503, "dependency-unavailable", "Redis did not take the recover job; nothing was sent again, retry shortly.", {
        headers: { "Retry-After": "2" },
        cause: err instanceof Error ? err.message : String(err),
      });
    }
    return toRecoveryResource((await this.recoveries.get(recovery.id)) ?? recovery);
  }

  /** One recovery of the endpoint; 404 otherwise (also for a recovery of another endpoint). */
  async get(organizationSlug: string, worldSlug: string, endpointId: string, recoveryId: string): Promise<RecoveryResource> {
    const endpoint = await this.endpoints.find(organizationSlug, worldSlug, endpointId);
    const row = isUuid(recoveryId) ? await this.recoveries.find(endpoint.id, recoveryId) : null;
    if (!row) throw notFound(`Webhook endpoint "${endpoint.id}" has no recovery "${recoveryId}".`);
    return toRecoveryResource(row);
  }
}

/** A recovery as the API shows it. */
export function toRecoveryResource(row: DeliveryRecovery): RecoveryResource {
  return {
    id: row.id,
    endpointId: row.endpointId,
    status: row.status as RecoveryStatus,
    total: row.total,
    requeued: row.requeued,
    since: row.since.toISOString(),
    until: row.until.toISOString(),
    error: row.error,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
