/** A delivery's status as a badge. */
import type { DeliveryStatus } from "@vw/contracts";
import { Badge } from "./ui.js";

const TONE: Record<DeliveryStatus, "ok" | "bad" | "warn" | "neutral"> = { delivered: "ok", failed: "bad", pending: "warn", skipped: "neutral" };

export const DELIVERY_STATUS_LIST = Object.keys(TONE) as DeliveryStatus[];

export function DeliveryStatusBadge({ status }: { status: DeliveryStatus }) {
  return <Badge tone={TONE[status]}>{status}</Badge>;
}
