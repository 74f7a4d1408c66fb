/** An endpoint's last 24 h as the history's stats rollup gives them (kept exact, cheap to read). */
import { useQuery } from "@tanstack/react-query";
import type { SendingWindowResource } from "@vw/contracts";
import { useSession } from "../session-context.js";
import { DeliveryFigures } from "./delivery-figures.js";
import { Loading, formatRate, formatTime } from "./ui.js";

/**
 * `useQuery` of one endpoint's stats, shared by the list, the overview and the detail: always
 * re-read when a screen shows them (staleTime 0), then every `refreshMs` (30 s on lists, where
 * one request per endpoint adds up; 5 s on the detail, like its delivery list).
 */
export function useEndpointStats(endpointId: string, refreshMs = 30_000) {
  const { api } = useSession();
  return useQuery({ queryKey: ["stats", endpointId], queryFn: () => api.stats(endpointId), refetchInterval: refreshMs, staleTime: 0 });
}

/** One line: last attempt and the 24 h success rate, or why there is none. */
export function EndpointStatsLine({ endpointId }: { endpointId: string }) {
  const stats = useEndpointStats(endpointId);
  if (stats.isPending) return <span className="muted">loading figures…</span>;
  if (stats.error) return <span className="muted">figures unavailable</span>;
  const s = stats.data;
  return (
    <>
      <span data-testid="last-attempt">
        Last attempt:{" "}
        {s.lastAttempt ? `${formatTime(s.lastAttempt.at)} (${s.lastAttempt.status === null ? "no answer" : `HTTP ${s.lastAttempt.status}`})` : "none in 24 h"}
      </span>
      <span data-testid="success-rate">
        24 h success: {formatRate(s.successRate)}
        {s.attempts.total > 0 ? ` of ${s.attempts.total} attempts` : ""}
      </span>
    </>
  );
}

/** The detail's figures: deliveries by where they stand, attempt success rate and latency, attempts per hour. */
export function EndpointStatsPanel({ endpointId }: { endpointId: string }) {
  const stats = useEndpointStats(endpointId, 5_000);
  return (
    <section className="card" aria-labelledby="stats-title">
      <h2 id="stats-title">Last 24 hours</h2>
      {stats.isPending ? <Loading label="Loading the figures…" /> : null}
      {stats.error ? <p className="muted">Figures unavailable right now.</p> : null}
      {stats.data?.sendingWindow ? <SendingWindow window={stats.data.sendingWindow} /> : null}
      {stats.data ? <DeliveryFigures stats={stats.data} latency /> : null}
    </section>
  );
}

const SLOWDOWN_REASONS = {
  throttled: "the receiver answered 429 or 503, asking for fewer requests at once",
  unresponsive: "the receiver timed out or refused connections",
} as const;

/**
 * How many deliveries the platform sends at once: at most its largest window, or, while slowed
 * down by the receiver's answers, fewer, why, and since when (it grows back as answers come).
 */
function SendingWindow({ window }: { window: SendingWindowResource }) {
  if (!window.slowedDown) {
    return (
      <p className="sending-window" data-testid="sending-window">
        Sending up to {window.max} deliveries at once.
      </p>
    );
  }
  return (
    <p className="sending-window slowed" role="status" data-testid="sending-window">
      <strong>Slowed down:</strong> sending {window.size} {window.size === 1 ? "delivery" : "deliveries"} at once instead of {window.max}
      {window.reason ? `, because ${SLOWDOWN_REASONS[window.reason]}` : ""}
      {window.since ? ` (since ${formatTime(window.since)})` : ""}. It grows back as the receiver answers.
    </p>
  );
}
