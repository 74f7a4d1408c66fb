/**
 * Automatic disabling of an endpoint (410 Gone, or DISABLE_AFTER_FAILURES consecutive failed
 * attempts), through `EndpointStore.disable` of @vw/db (admin-api's manual disable's path too): one
 * conditional UPDATE decides which worker wins, so however many attempts race, the endpoint is
 * disabled once and the administrators get one mail. Its waiting deliveries are marked skipped in
 * the same transaction: a disabled endpoint receives nothing, now or after it is re-enabled (no
 * catch-up).
 */
import type { EndpointStore } from "@vw/db";
import { enqueueEndpointDisabledMail, type AutomaticDisableReason } from "@vw/queues";
import type { Queue } from "bullmq";
import type { Logger } from "@vw/service-kit";

/** What caused the disable (goes into the mail). */
export interface DisableCause {
  endpointId: string;
  reason: AutomaticDisableReason;
  deliveryId: string;
  status: number | null;
  error: string | null;
  consecutiveFailures: number;
}

/** Disables endpoints and queues the administrators' mail. */
export class EndpointDisabler {
  constructor(
    private readonly endpoints: EndpointStore,
    private readonly notifications: Queue,
    private readonly logger: Logger,
  ) {}

  /** Returns true when this call disabled the endpoint (false: already disabled or deleted). */
  async disable(cause: DisableCause): Promise<boolean> {
    const disabledAt = await this.endpoints.disable({ id: cause.endpointId }, cause.reason);
    if (disabledAt === null) return false;
    this.logger.warn({ ...cause }, `endpoint disabled (${cause.reason === "gone" ? "410 Gone" : "consecutive failures"})`);
    await enqueueEndpointDisabledMail(this.notifications, { ...cause, disabledAt: disabledAt.toISOString() });
    return true;
  }
}
