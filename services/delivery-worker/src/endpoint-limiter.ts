/**
 * Per-endpoint concurrency within one worker process, so one slow or dead endpoint never holds
 * the worker's slots: an endpoint gets at most `limit` deliveries in flight, and only `slowLimit`
 * while its latest attempt timed out or could not connect (a dead endpoint then ties up two slots
 * for the length of the timeout, not ten). A job that finds its endpoint saturated is put back in
 * the queue with a delay (not an attempt: nothing was sent), which is also what makes the
 * single FIFO queue fair: a burst for one endpoint steps aside for everyone else's deliveries.
 */

/** Options of {@link EndpointLimiter}. */
export interface EndpointLimiterOptions {
  /** In flight per endpoint (DELIVERY_ENDPOINT_CONCURRENCY). */
  limit: number;
  /** In flight per endpoint while it is timing out / refusing connections. */
  slowLimit?: number;
  /** The delivery timeout: how long a slot of a slow endpoint stays taken. */
  timeoutMs: number;
  random?: () => number;
}

/** Tracks deliveries in flight per endpoint. */
export class EndpointLimiter {
  private readonly inFlight = new Map<string, number>();
  private readonly slow = new Set<string>();
  private readonly slowLimit: number;
  private readonly random: () => number;

  constructor(private readonly options: EndpointLimiterOptions) {
    this.slowLimit = Math.min(options.slowLimit ?? 2, options.limit);
    this.random = options.random ?? Math.random;
  }

  /** Takes a slot for the endpoint; false when it already has its share in flight. */
  tryAcquire(endpointId: string): boolean {
    const current = this.inFlight.get(endpointId) ?? 0;
    const limit = this.slow.has(endpointId) ? this.slowLimit : this.options.limit;
    if (current >= limit) return false;
    this.inFlight.set(endpointId, current + 1);
    return true;
  }

  /** Gives the slot back and remembers whether the endpoint looked dead (timeout, connection error). */
  release(endpointId: string, unresponsive?: boolean): void {
    const current = (this.inFlight.get(endpointId) ?? 1) - 1;
    if (current <= 0) this.inFlight.delete(endpointId);
    else this.inFlight.set(endpointId, current);
    if (unresponsive === true) this.slow.add(endpointId);
    else if (unresponsive === false) this.slow.delete(endpointId);
  }

  /**
   * How long a job turned away should wait before trying again: about half the timeout for a
   * slow endpoint (that is when a slot may free up), 100 ms otherwise; doubling with each time
   * the same job was turned away (so a large backlog costs few Redis round trips), at most a
   * minute, with up to 100% jitter so deferred jobs do not come back together.
   */
  deferDelay(endpointId: string, timesDeferred: number): number {
    const base = this.slow.has(endpointId) ? this.options.timeoutMs / 2 : 100;
    const delay = Math.min(60_000, base * 2 ** Math.min(Math.max(timesDeferred, 0), 10));
    return Math.round(delay * (1 + this.random()));
  }

  /** Deliveries in flight for an endpoint (metrics, tests). */
  active(endpointId: string): number {
    return this.inFlight.get(endpointId) ?? 0;
  }

  /** Endpoints currently held to the slow limit (metrics). */
  slowCount(): number {
    return this.slow.size;
  }
}
