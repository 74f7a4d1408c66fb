/** An endpoint's state as a badge plus, when disabled, why. */
import type { EndpointResource } from "@vw/contracts";
import { Badge } from "./ui.js";

const REASONS: Record<NonNullable<EndpointResource["disabledReason"]>, string> = {
  manual: "disabled by a person",
  gone: "the receiver answered 410 Gone",
  failures: "too many consecutive failed deliveries",
};

export function EndpointState({ endpoint }: { endpoint: EndpointResource }) {
  if (endpoint.enabled) return <Badge tone="ok">enabled</Badge>;
  return (
    <span>
      <Badge tone="bad">disabled</Badge>{" "}
      {endpoint.disabledReason ? <span className="muted">({REASONS[endpoint.disabledReason]})</span> : null}
    </span>
  );
}
