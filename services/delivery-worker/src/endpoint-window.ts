/**
 * An endpoint's window of attempts in flight, adapted to how its receiver answers (AIMD, with a
 * memory of where it broke). One drain runs an endpoint at a time across every replica
 * (`@vw/queues` drain-signals.ts), so the window is that drain's own and no replica has to ask
 * another for a slot; it is handed to the next drain through Redis (windows.ts).
 *
 * - It opens at the endpoint's largest window (DELIVERY_ENDPOINT_CONCURRENCY).
 * - A `429` or `503` (the receiver asks for less) halves it, down to 1, and remembers the size
 *   that was too large: at most one halving per round of attempts in flight, since the attempts
 *   already sent at the old size answer the same.
 * - A timeout or a failed connection (the receiver is not keeping up, or is gone) brings it down to
 *   the slow window (2).
 * - Answers grow it back: by one for each full window of answered attempts (one round trip), up to
 *   the size below the one that broke; past that, only after {@link PROBE_ROUNDS} quiet rounds,
 *   so a receiver that allows 3 requests at once is asked for a 4th rarely. The memory fades after
 *   {@link CEILING_MEMORY_MS} without a throttle, so a receiver that grew is found out.
 */

/** Rounds of answered attempts at the remembered limit before one more attempt in flight is tried. */
export const PROBE_ROUNDS = 8;
/** How long a size that was too large is remembered without another throttle. */
export const CEILING_MEMORY_MS = 120_000;
/** The window after a timeout or a failed connection. */
export const SLOW_WINDOW = 2;

/** Why a window is below its largest size, as the dashboard says it. */
export type SlowdownReason = "throttled" | "unresponsive";

/** What the dashboard and the next drain know of a window. */
export interface WindowState {
  size: number;
  max: number;
  /** Why it is smaller than `max` (null: it is not, or it is growing back from an old reason). */
  reason: SlowdownReason | null;
  /** When it last shrank (ms since the epoch), or null. */
  since: number | null;
  /** The size that last proved too large (a throttle), remembered for {@link CEILING_MEMORY_MS}. */
  ceiling: number | null;
}

/** See the file comment. */
export class EndpointWindow {
  private sizeNow: number;
  private reason: SlowdownReason | null;
  private since: number | null;
  private ceiling: number | null;
  private answered = 0;
  /** Attempts started since the last shrink: a shrink waits for a round to pass before the next. */
  private startedSinceShrink = Number.POSITIVE_INFINITY;

  constructor(
    readonly max: number,
    private readonly now: () => number = Date.now,
    restored: WindowState | null = null,
  ) {
    const fresh = restored === null || restored.max !== max;
    this.sizeNow = fresh ? max : Math.max(1, Math.min(max, restored.size));
    this.reason = fresh ? null : restored.reason;
    this.since = fresh ? null : restored.since;
    this.ceiling = fresh ? null : restored.ceiling;
  }

  /** Attempts that may be in flight now. */
  get size(): number {
    return this.sizeNow;
  }

  /** Whether it is below its largest size. */
  get slowed(): boolean {
    return this.sizeNow < this.max;
  }

  /** The window as the dashboard and the next drain read it. */
  state(): WindowState {
    return { size: this.sizeNow, max: this.max, reason: this.slowed ? this.reason : null, since: this.slowed ? this.since : null, ceiling: this.ceiling };
  }

  /** Called when an attempt starts. */
  started(): void {
    this.startedSinceShrink += 1;
  }

  /**
   * Applies an attempt's end (the fate's window signal); resolves true when the size changed, so
   * the caller can hand the new state on.
   */
  apply(signal: "answered" | "throttled" | "unresponsive" | "none"): boolean {
    const before = this.sizeNow;
    const t = this.now();
    if (this.ceiling !== null && this.since !== null && t - this.since > CEILING_MEMORY_MS) this.ceiling = null;
    if (signal === "throttled") {
      // The attempts sent before the last shrink answer at the old size: one halving per round.
      if (this.startedSinceShrink >= this.sizeNow) {
        this.ceiling = this.sizeNow;
        this.shrink(Math.max(1, Math.floor(this.sizeNow / 2)), "throttled", t);
      }
    } else if (signal === "unresponsive") {
      if (this.sizeNow > SLOW_WINDOW) this.shrink(SLOW_WINDOW, "unresponsive", t);
    } else if (signal === "answered" && this.sizeNow < this.max) {
      this.answered += 1;
      const probing = this.ceiling !== null && this.sizeNow + 1 >= this.ceiling;
      if (this.answered >= this.sizeNow * (probing ? PROBE_ROUNDS : 1)) {
        this.answered = 0;
        this.sizeNow += 1;
      }
    }
    return this.sizeNow !== before;
  }

  private shrink(size: number, reason: SlowdownReason, t: number): void {
    this.sizeNow = Math.min(this.sizeNow, size);
    this.reason = reason;
    this.since = t;
    this.answered = 0;
    this.startedSinceShrink = 0;
  }
}
