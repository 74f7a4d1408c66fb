/**
 * The in-process half of the endpoint scheduler: how long a job of this process waits for a slot
 * of a busy endpoint before it parks. It remembers which endpoints answered this process lately
 * and which of its jobs wait for which endpoint, so a release here wakes the oldest waiter at once.
 * Nothing here is shared with other replicas (that is {@link EndpointSchedulerStore}'s Redis
 * state), and time comes from an injected {@link SchedulerClock}, so tests drive it without
 * asserting wall-clock bounds.
 */
import type { Acquired } from "./endpoint-scheduler-store.js";

/** Time as the policy sees it: a monotonic-enough `now` and timers. */
export interface SchedulerClock {
  now(): number;
  /** Calls `fn` after `ms`; returns a cancel function. */
  setTimer(ms: number, fn: () => void): () => void;
}

/** The process's clock. */
export const systemClock: SchedulerClock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

/** How often a waiting job asks again without a local release (other replicas' releases). */
export const SLOT_POLL_MS = 20;

/**
 * How much longer than its `withinMs` a job waits for an endpoint that answered recently: until
 * this many times `withinMs` have passed since its last answer (and since the job began to wait).
 */
export const ANSWERING_WAIT_FACTOR = 5;

/** Endpoints whose last answer the policy remembers; past this, the oldest half is forgotten. */
const MAX_ANSWERED_REMEMBERED = 10_000;

/** See the file comment. */
export class SlotWaitPolicy {
  /** This process's jobs waiting for a slot, oldest first, by endpoint. */
  private readonly waiters = new Map<string, (() => void)[]>();
  /** When an attempt of this process last got an answer from each endpoint (oldest first). */
  private readonly answeredAt = new Map<string, number>();

  constructor(readonly clock: SchedulerClock = systemClock) {}

  /**
   * Asks `acquire` for a slot, and when the endpoint's window is merely full (no backlog), waits
   * for one instead of giving up: woken by this process's releases of the endpoint, and asking
   * again every {@link SLOT_POLL_MS} for other replicas'. A fast endpoint at its window frees a
   * slot within milliseconds, and parking its job would cost a park, a promotion and a second
   * fetch; worse, during a burst the promoted job waits behind the whole wait list while it holds
   * its reservation, so every later job of that endpoint parks too.
   *
   * It waits `withinMs`, or, for an endpoint that answered one of this process's attempts within
   * the last {@link ANSWERING_WAIT_FACTOR} x `withinMs`, until that long has passed since its last
   * answer (and at most that long in all). On a machine short of CPU, all of a fast endpoint's
   * attempts in flight can stall for a few hundred milliseconds; with a flat wait, healthy jobs
   * parked in cascades. An endpoint that has not answered lately (hung, timing out, or new) still
   * parks its jobs after `withinMs`: a waiting job holds one of the worker's slots, which others
   * need. Refused then, or as soon as the endpoint has parked jobs (FIFO: this job queues behind them).
   */
  async acquireWithin(endpointId: string, withinMs: number, acquire: () => Promise<Acquired>): Promise<Acquired> {
    const started = this.clock.now();
    const longest = withinMs * ANSWERING_WAIT_FACTOR;
    let slot = await acquire();
    while (!slot.granted && !slot.backlogged) {
      const answered = this.answeredAt.get(endpointId);
      const deadline = answered === undefined ? started + withinMs : Math.max(started + withinMs, Math.min(answered, started) + longest);
      const left = deadline - this.clock.now();
      if (left <= 0) break;
      await this.slotFreed(endpointId, Math.min(SLOT_POLL_MS, left));
      slot = await acquire();
    }
    return slot;
  }

  /** Remembers that the endpoint answered an attempt of this process just now. */
  noteAnswer(endpointId: string): void {
    this.answeredAt.delete(endpointId); // re-inserted last: the map stays oldest first
    this.answeredAt.set(endpointId, this.clock.now());
    if (this.answeredAt.size > MAX_ANSWERED_REMEMBERED) {
      let drop = this.answeredAt.size / 2;
      for (const key of this.answeredAt.keys()) {
        if (drop-- <= 0) break;
        this.answeredAt.delete(key);
      }
    }
  }

  /** A slot of the endpoint was released here: the oldest job of this process waiting for one asks again now. */
  released(endpointId: string): void {
    this.waiters.get(endpointId)?.[0]?.();
  }

  /** Resolves when this process releases a slot of the endpoint, or after `ms`. */
  private slotFreed(endpointId: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let waiters = this.waiters.get(endpointId);
      if (!waiters) {
        waiters = [];
        this.waiters.set(endpointId, waiters);
      }
      const list = waiters;
      const wake = () => {
        cancel();
        const at = list.indexOf(wake);
        if (at >= 0) list.splice(at, 1);
        if (list.length === 0 && this.waiters.get(endpointId) === list) this.waiters.delete(endpointId);
        resolve();
      };
      const cancel = this.clock.setTimer(ms, wake);
      list.push(wake);
    });
  }
}
