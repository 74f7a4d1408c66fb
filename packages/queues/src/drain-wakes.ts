/**
 * The worker's side of the wakes published for lingering drains (drain-signals.ts): one subscriber
 * connection per process, and the drains of this process waiting for their endpoint's next wake.
 * Pub/sub loses what is published while the connection is down: a drain that misses its wake only
 * lingers until its time is up, then finds the dirty flag set and goes on.
 */
import type { Cluster, Redis } from "ioredis";
import { wakeChannel } from "./drain-signals.js";
import type { RedisClient } from "./redis-connection.js";

/** A drain's registration: whether its endpoint was woken since it last looked, and a wait for the next wake. */
export interface DrainWakeHandle {
  /** True once a wake of the endpoint arrived since the last {@link DrainWakeHandle.reset}. */
  readonly woken: boolean;
  /** Forgets the wakes so far (the drain is about to look for work). */
  reset(): void;
  /** Resolves true at the next wake (at once if one came since the last reset), false after `ms` or once `cancel` aborts. */
  wait(ms: number, cancel?: AbortSignal): Promise<boolean>;
  /** Ends the registration (the drain ended). */
  release(): void;
}

interface Registration {
  woken: boolean;
  notify: (() => void) | null;
}

/** See the file comment. */
export class DrainWakes {
  private readonly registrations = new Map<string, Set<Registration>>();
  /** The waits each cancelling signal ends (see {@link DrainWakes.waitersOf}). */
  private readonly cancels = new WeakMap<AbortSignal, Set<() => void>>();
  private subscriber: Redis | Cluster | null = null;
  private readonly channel: string;

  constructor(
    private readonly connection: RedisClient,
    keyPrefix: string,
    private readonly onError: (err: Error) => void,
  ) {
    this.channel = wakeChannel(keyPrefix);
  }

  /** Opens the subscriber connection (a duplicate of the worker's) and subscribes. */
  async start(): Promise<void> {
    const subscriber = (this.connection as { duplicate(): Redis | Cluster }).duplicate();
    this.subscriber = subscriber;
    subscriber.on("error", this.onError);
    subscriber.on("message", (channel: string, message: string) => {
      if (channel !== this.channel) return;
      for (const endpointId of message.split(",")) {
        for (const r of this.registrations.get(endpointId) ?? []) {
          r.woken = true;
          r.notify?.();
        }
      }
    });
    await subscriber.subscribe(this.channel);
  }

  /** Registers a drain of `endpointId` (see {@link DrainWakeHandle}). */
  register(endpointId: string): DrainWakeHandle {
    let set = this.registrations.get(endpointId);
    if (!set) this.registrations.set(endpointId, (set = new Set()));
    const registration: Registration = { woken: false, notify: null };
    set.add(registration);
    return {
      get woken() {
        return registration.woken;
      },
      reset: () => {
        registration.woken = false;
      },
      wait: (ms, cancel) =>
        new Promise<boolean>((resolve) => {
          if (registration.woken || ms <= 0 || cancel?.aborted === true) return resolve(registration.woken);
          const done = (woken: boolean) => {
            clearTimeout(timer);
            if (cancel) this.waitersOf(cancel).delete(aborted);
            registration.notify = null;
            resolve(woken);
          };
          const aborted = () => done(false);
          registration.notify = () => done(true);
          const timer = setTimeout(aborted, ms);
          if (cancel) this.waitersOf(cancel).add(aborted);
        }),
      release: () => {
        set.delete(registration);
        if (set.size === 0) this.registrations.delete(endpointId);
      },
    };
  }

  /**
   * The waits that `signal` cancels, behind one listener of the signal. A listener each would cost
   * every wait a scan of the others (an AbortSignal's listeners are a list that adding a listener
   * searches for duplicates), and a thousand drains lingering at once share one signal.
   */
  private waitersOf(signal: AbortSignal): Set<() => void> {
    let waiters = this.cancels.get(signal);
    if (waiters === undefined) {
      const created = new Set<() => void>();
      this.cancels.set(signal, created);
      signal.addEventListener("abort", () => {
        for (const cancel of [...created]) cancel();
      }, { once: true });
      waiters = created;
    }
    return waiters;
  }

  /** Unsubscribes and closes the subscriber connection. */
  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = null;
    if (subscriber === null) return;
    await subscriber.quit().catch(() => subscriber.disconnect());
  }
}
