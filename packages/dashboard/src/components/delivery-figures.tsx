/**
 * The 24 h figures of an endpoint or a world, in words that cannot contradict each other:
 * deliveries by where they stand now (delivered, failed for good, still retrying) beside the
 * share of attempts that succeeded, each saying what it counts, and the chart of attempts per
 * hour. A failing endpoint reads "0 failed for good, 3 still retrying, 0 % of 6 attempts", not
 * "0 failed" beside "0 % succeeded".
 */
import type { EndpointStatsResource } from "@vw/contracts";
import { AttemptsChart } from "./attempts-chart.js";
import { formatRate } from "./ui.js";

function Figure({ value, label, hint, testId }: { value: string | number; label: string; hint?: string; testId: string }) {
  return (
    <div className="stat" data-testid={testId}>
      <span className="stat-value">{value}</span>
      <span className="stat-label">{label}</span>
      {hint ? <span className="stat-hint">{hint}</span> : null}
    </div>
  );
}

/** The figures and the chart; `latency` adds the attempts' p50/p99 (an endpoint's page). */
export function DeliveryFigures({ stats, latency = false }: { stats: EndpointStatsResource; latency?: boolean }) {
  const { deliveries, attempts } = stats;
  return (
    <>
      <p className="hint">Deliveries created in the last 24 hours, by where they stand now; attempts count every try, retries included.</p>
      <div className="stats figures">
        <Figure testId="figure-delivered" value={deliveries.delivered} label="deliveries delivered" />
        <Figure testId="figure-failed" value={deliveries.failed} label="deliveries failed for good" hint="no retry left, or refused" />
        <Figure testId="figure-retrying" value={deliveries.pending} label="deliveries still retrying" hint="waiting for their next attempt" />
        {deliveries.skipped > 0 ? <Figure testId="figure-skipped" value={deliveries.skipped} label="deliveries skipped" hint="endpoint disabled first" /> : null}
        <Figure
          testId="figure-success-rate"
          value={formatRate(stats.successRate)}
          label="attempt success rate"
          hint={attempts.total === 0 ? "no attempt yet" : `${attempts.succeeded} of ${attempts.total} attempts answered 2xx`}
        />
        {latency ? (
          <Figure
            testId="figure-latency"
            value={stats.latencyMs ? `${Math.round(stats.latencyMs.p50)} ms` : "—"}
            label="attempt latency, median"
            {...(stats.latencyMs ? { hint: `p99 ${Math.round(stats.latencyMs.p99)} ms` } : {})}
          />
        ) : null}
      </div>
      <AttemptsChart hours={stats.attemptsByHour} title="Attempts per hour, last 24 hours: delivered and failed" />
    </>
  );
}
