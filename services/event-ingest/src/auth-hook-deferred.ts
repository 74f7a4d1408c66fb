/**
 * The auth hook's calls that did not fit in the answer's budget (AUTH_HOOK_TIMEOUT_MS): they are
 * still made after the answer, in the background, and bounded so a world with hanging receivers
 * cannot pile work up in the process:
 * - one lane per world: its deferred calls run one at a time, in the order they were queued (the
 *   endpoints of one hook call stay one after another, as the spec wants them);
 * - at most `maxQueued` calls wait in the whole process; calls over that are dropped, logged and
 *   counted, never made (each call still costs up to AUTH_HOOK_TIMEOUT_MS, so a backlog beyond it
 *   would deliver `member.connecting` long after the member connected).
 */
import type { Logger } from "@vw/service-kit";

/** Default of the most deferred calls waiting in one process. */
export const DEFAULT_DEFERRED_HOOK_CALLS_MAX = 1000;

/** One deferred call: never throws (its outcome is recorded by the call itself). */
export type DeferredCall = () => Promise<void>;

/** Options of {@link DeferredHookCalls}. */
export interface DeferredHookCallsOptions {
  logger: Logger;
  /** Most calls waiting across all worlds; {@link DEFAULT_DEFERRED_HOOK_CALLS_MAX} by default. */
  maxQueued?: number;
  /** Told how many calls were dropped because the process's queue was full (for a metric). */
  onDropped?: (calls: number) => void;
}

/** Per-world serial lanes of deferred hook calls (see the file comment). */
export class DeferredHookCalls {
  private readonly lanes = new Map<string, DeferredCall[]>();
  private readonly running = new Map<string, Promise<void>>();
  private queued = 0;

  constructor(private readonly options: DeferredHookCallsOptions) {}

  /** Calls waiting (not yet started) across all worlds. */
  get waiting(): number {
    return this.queued;
  }

  /**
   * Queues `calls` on `world`'s lane, in order; those that do not fit under the process's bound
   * are dropped and reported. Returns how many were queued.
   */
  enqueue(world: string, calls: readonly DeferredCall[]): number {
    const room = Math.max(0, (this.options.maxQueued ?? DEFAULT_DEFERRED_HOOK_CALLS_MAX) - this.queued);
    const taken = calls.slice(0, room);
    const dropped = calls.length - taken.length;
    if (dropped > 0) {
      this.options.onDropped?.(dropped);
      this.options.logger.warn({ world, dropped, waiting: this.queued }, "auth hook: deferred calls dropped (too many waiting in this process)");
    }
    if (taken.length === 0) return 0;
    const lane = this.lanes.get(world);
    if (lane) lane.push(...taken);
    else this.lanes.set(world, [...taken]);
    this.queued += taken.length;
    if (!this.running.has(world)) this.start(world);
    return taken.length;
  }

  /**
   * Resolves once every queued call has run (calls queued meanwhile included). Shutdown calls it
   * after the HTTP server has closed, when no new call can come.
   */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }

  private start(world: string): void {
    const run = (async () => {
      for (;;) {
        const call = this.lanes.get(world)?.shift();
        if (call === undefined) break;
        this.queued -= 1;
        try {
          await call();
        } catch (err) {
          // A call records its own outcome; anything reaching here is a bug worth a line, not a crash.
          this.options.logger.error({ world, err }, "auth hook: deferred call failed");
        }
      }
      this.lanes.delete(world);
      this.running.delete(world);
    })();
    this.running.set(world, run);
  }
}
