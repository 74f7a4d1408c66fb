/**
 * The endpoints' windows this process drained lately. A drain opens its endpoint's window from
 * here: the one this process left, or, for an endpoint it has not drained lately, the one the last
 * drain of any replica stored in Redis (its shard's `…:vw:win:<endpointId>`), so a slowdown
 * survives a drain moving to another replica. Every change is stored for the next drain and for
 * the dashboard's endpoint page; `vw_delivery_endpoints_slowed` counts the slowed ones, with no
 * label per endpoint.
 */
import type { DrainSignals } from "@vw/queues";
import { EndpointWindow } from "./endpoint-window.js";
import type { WorkerMetrics } from "./metrics.js";

/** An endpoint not drained here for this long is read from Redis again (another replica may have drained it). */
const LOCAL_MS = 60_000;
/** Windows kept in memory at most (the oldest go first). */
const MAX_WINDOWS = 10_000;

interface Entry {
  window: EndpointWindow;
  usedAt: number;
}

/** See the file comment. */
export class EndpointWindows {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly signals: DrainSignals,
    /** DELIVERY_ENDPOINT_CONCURRENCY: every window's largest size. */
    private readonly max: number,
    private readonly metrics: WorkerMetrics,
    private readonly onError: (err: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** The endpoint's window for a drain starting now. */
  async open(endpointId: string): Promise<EndpointWindow> {
    const t = this.now();
    const entry = this.entries.get(endpointId);
    if (entry !== undefined && t - entry.usedAt < LOCAL_MS) {
      entry.usedAt = t;
      return entry.window;
    }
    const stored = await this.signals.loadWindow(endpointId).catch((err: unknown) => {
      this.onError(err);
      return null;
    });
    const window = new EndpointWindow(this.max, this.now, stored);
    this.entries.delete(endpointId);
    this.entries.set(endpointId, { window, usedAt: t });
    if (this.entries.size > MAX_WINDOWS) this.entries.delete(this.entries.keys().next().value as string);
    return window;
  }

  /** Stores a window that changed (or, at a drain's end, one still slowed, so it is not forgotten meanwhile). */
  save(endpointId: string, window: EndpointWindow): void {
    const entry = this.entries.get(endpointId);
    if (entry !== undefined) entry.usedAt = this.now();
    this.signals.saveWindow(endpointId, window.state()).catch(this.onError);
    this.refreshGauge();
  }

  /** Sets `vw_delivery_endpoints_slowed` from the windows used within the last minute. */
  refreshGauge(): void {
    const t = this.now();
    const counts = { throttled: 0, unresponsive: 0 };
    for (const { window, usedAt } of this.entries.values()) {
      const reason = window.state().reason;
      if (t - usedAt < LOCAL_MS && reason !== null) counts[reason] += 1;
    }
    this.metrics.endpointsSlowed.set({ reason: "throttled" }, counts.throttled);
    this.metrics.endpointsSlowed.set({ reason: "unresponsive" }, counts.unresponsive);
  }
}
