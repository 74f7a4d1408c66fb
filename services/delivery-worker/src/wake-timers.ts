/**
 * The timers that wake an endpoint when a retry is due: one delayed `drain.v1` job per endpoint and
 * tick (`@vw/queues` DrainSignals.wakeAt), and here, one Redis call per endpoint and tick at most:
 * the retries of a burst that failed together share their timers without asking Redis again.
 */
import { TIMER_TICK_MS, type DrainSignals } from "@vw/queues";

/** Timers remembered at most (the oldest go first); one already due is forgotten anyway. */
const MAX_REMEMBERED = 10_000;

/** See the file comment. */
export class WakeTimers {
  /** `<endpointId>/<tick>` of the timers set from here, with that tick. */
  private readonly set = new Map<string, number>();

  constructor(private readonly signals: Pick<DrainSignals, "wakeAt">) {}

  /** Wakes `endpointId` at `at` (rounded up to its tick). */
  async wakeAt(endpointId: string, at: Date): Promise<void> {
    const tick = Math.ceil(at.getTime() / TIMER_TICK_MS);
    const key = `${endpointId}/${tick}`;
    if (this.set.has(key)) return;
    await this.signals.wakeAt(endpointId, at);
    this.set.set(key, tick);
    if (this.set.size > MAX_REMEMBERED) this.forgetPast();
  }

  private forgetPast(): void {
    const now = Date.now() / TIMER_TICK_MS;
    for (const [key, tick] of this.set) if (tick < now) this.set.delete(key);
    while (this.set.size > MAX_REMEMBERED) this.set.delete(this.set.keys().next().value as string);
  }
}
