/**
 * Per-endpoint concurrency within one worker process, so one slow or dead endpoint never holds
 * the worker's slots. Each endpoint has a window of deliveries it may have in flight, managed
 * like TCP slow start: it opens at `initialLimit`, grows by one with every answered attempt up to
 * `limit` (DELIVERY_ENDPOINT_CONCURRENCY), and falls back to `slowLimit` on a timeout or a
 * connection error. A dead endpoint therefore never gets more than two requests hanging, while
 * a healthy one reaches its full window after a few answers.
 *
 * A job that finds its endpoint's window full is put back in the queue with a delay (not an
 * attempt: nothing was sent). That is also what makes the single FIFO queue fair: a burst for one
 * endpoint steps aside for everybody else's deliveries.
 */

/** Options of {@link EndpointLimiter}. */
export interface EndpointLimiterOptions {
  /** Largest window per endpoint (DELIVERY_ENDPOINT_CONCURRENCY). */
  limit: number;
  /** Window of an endpoint not seen yet. Default 2. */
  initialLimit?: number;
  /** Window after a timeout or connection error. Default 2. */
  slowLimit?: number;
  /** The delivery timeout: how long a slot of an unresponsive endpoint may stay taken. */
  timeoutMs: number;
  random?: () => number;
  /** Monotonic clock (ms); injectable for tests. */
  now?: () => number;
}

interface EndpointWindow {
  limit: number;
  /** Start times of the attempts in flight. */
  started: number[];
  unresponsive: boolean;
}

/** How an attempt ended, for the window. */
export type AttemptSignal = "answered" | "unresponsive" | "none";

/** Tracks deliveries in flight per endpoint. */
export class EndpointLimiter {
  private readonly windows = new Map<string, EndpointWindow>();
  private readonly initialLimit: number;
  private readonly slowLimit: number;
  private readonly random: () => number;
  private readonly now: () => number;

  constructor(private readonly options: EndpointLimiterOptions) {
    this.initialLimit = Math.min(options.initialLimit ?? 2, options.limit);
    this.slowLimit = Math.min(options.slowLimit ?? 2, options.limit);
    this.random = options.random ?? Math.random;
    this.now = options.now ?? (() => performance.now());
  }

  private window(endpointId: string): EndpointWindow {
    let window = this.windows.get(endpointId);
    if (!window) {
      if (this.windows.size >= 50_000) this.forgetIdle();
      window = { limit: this.initialLimit, started: [], unresponsive: false };
      this.windows.set(endpointId, window);
    }
    return window;
  }

  /** Takes a slot for the endpoint; false when its window is full. */
  tryAcquire(endpointId: string): boolean {
    const window = this.window(endpointId);
    if (window.started.length >= window.limit) return false;
    window.started.push(this.now());
    return true;
  }

  /** Gives the slot back and adapts the window to how the attempt ended. */
  release(endpointId: string, signal: AttemptSignal = "none"): void {
    const window = this.windows.get(endpointId);
    if (!window) return;
    window.started.shift();
    if (signal === "answered") {
      window.unresponsive = false;
      window.limit = Math.min(this.options.limit, window.limit + 1);
    } else if (signal === "unresponsive") {
      window.unresponsive = true;
      window.limit = this.slowLimit;
    }
  }

  /**
   * How long a job turned away should wait before trying again: about as long as the oldest
   * attempt in flight has been running (that is roughly when a slot frees up; at least 100 ms, at
   * most half the timeout, half the timeout for an endpoint known to be unresponsive), doubled
   * with each time the same job was turned away so a large backlog costs few Redis round trips,
   * at most a minute, with up to 100% jitter so deferred jobs do not come back together.
   */
  deferDelay(endpointId: string, timesDeferred: number): number {
    const window = this.windows.get(endpointId);
    const half = this.options.timeoutMs / 2;
    const oldest = window?.started[0];
    const age = oldest === undefined ? 0 : this.now() - oldest;
    const base = window?.unresponsive ? half : Math.min(half, Math.max(100, age));
    const delay = Math.min(60_000, base * 2 ** Math.min(Math.max(timesDeferred, 0), 10));
    return Math.round(delay * (1 + this.random()));
  }

  /** Deliveries in flight for an endpoint (metrics, tests). */
  active(endpointId: string): number {
    return this.windows.get(endpointId)?.started.length ?? 0;
  }

  /** The endpoint's current window. */
  limitOf(endpointId: string): number {
    return this.windows.get(endpointId)?.limit ?? this.initialLimit;
  }

  private forgetIdle(): void {
    for (const [id, window] of this.windows) if (window.started.length === 0) this.windows.delete(id);
  }
}
