/**
 * Per-endpoint scheduling of a deliveries shard, shared by every worker replica and producer:
 *
 * - a **window** of concurrent attempts per endpoint, held in Redis as leases, so the limit holds
 *   across replicas, and a killed worker's slots come back when its leases expire;
 * - a **parked set** per endpoint: a job whose endpoint has no free slot waits in BullMQ's delayed
 *   set (a far-off timestamp, a safety net) with its id parked here, costing nothing while it
 *   waits; each freed slot is handed to the oldest parked job (a reservation) and that one job is
 *   promoted to the wait list. So a backlog costs work per delivery, not per unit of waiting time,
 *   and never stands in the wait list in front of other endpoints' jobs;
 * - a **throttle** (`rateLimitPerSecond`): starts are spaced 1/rate apart across all replicas
 *   (a GCRA-style theoretical arrival time in the endpoint's hash).
 *
 * Two halves: {@link EndpointSchedulerStore} holds all of that in Redis (scripts, one shard's keys
 * under its hash tag), and {@link SlotWaitPolicy} decides in process how long a job waits for a
 * slot before it parks. This class puts them together for the worker and the producers.
 *
 * The job stays a BullMQ job throughout (at least once, retries, infrastructure backoff and stalled
 * recovery are BullMQ's): only the decision of when it may go to the wait list is ours.
 */
import type { Job, Queue } from "bullmq";
import { EndpointSchedulerStore, type Acquired, type BacklogStats, type EndpointSchedulerOptions, type WindowSignal } from "./endpoint-scheduler-store.js";
import { SlotWaitPolicy, type SchedulerClock } from "./slot-wait-policy.js";

export { INITIAL_WINDOW } from "./endpoint-scheduler.lua.js";
export * from "./endpoint-scheduler-store.js";
export * from "./slot-wait-policy.js";

/** Options of {@link EndpointScheduler.forQueue}: the store's tuning, and the policy's clock. */
export interface EndpointSchedulerSetup extends EndpointSchedulerOptions {
  clock?: SchedulerClock;
}

/** The scheduler of one deliveries shard queue; see the module comment. */
export class EndpointScheduler {
  constructor(
    readonly store: EndpointSchedulerStore,
    readonly policy: SlotWaitPolicy = new SlotWaitPolicy(),
  ) {}

  /** A scheduler on the queue's own Redis connection. */
  static async forQueue(queue: Queue, options: EndpointSchedulerSetup = {}): Promise<EndpointScheduler> {
    const { clock, ...storeOptions } = options;
    return new EndpointScheduler(await EndpointSchedulerStore.forQueue(queue, storeOptions), new SlotWaitPolicy(clock));
  }

  /** The shard queue this scheduler serves. */
  get queue(): Queue {
    return this.store.queue;
  }

  /** Key base of the shard's scheduler keys (tests, diagnostics). */
  get base(): string {
    return this.store.base;
  }

  get parkTimeoutMs(): number {
    return this.store.parkTimeoutMs;
  }

  /** See {@link EndpointSchedulerStore.acquire}. */
  acquire(endpointId: string, jobId: string, token: string, fresh = false): Promise<Acquired> {
    return this.store.acquire(endpointId, jobId, token, fresh);
  }

  /** {@link acquire}, waiting for a slot of a busy endpoint as {@link SlotWaitPolicy.acquireWithin} says. */
  acquireWithin(endpointId: string, jobId: string, token: string, withinMs: number, fresh = false): Promise<Acquired> {
    return this.policy.acquireWithin(endpointId, withinMs, () => this.store.acquire(endpointId, jobId, token, fresh));
  }

  /** Gives the job's slot back (see {@link EndpointSchedulerStore.release}) and wakes this process's oldest waiter for the endpoint. */
  async release(endpointId: string, jobId: string, token: string, signal: WindowSignal): Promise<void> {
    if (signal === "answered") this.policy.noteAnswer(endpointId);
    try {
      await this.store.release(endpointId, jobId, token, signal);
    } finally {
      this.policy.released(endpointId);
    }
  }

  park(endpointId: string, jobIds: readonly string[]): Promise<void> {
    return this.store.park(endpointId, jobIds);
  }

  intendPark(jobsByEndpoint: ReadonlyMap<string, readonly string[]>): Promise<void> {
    return this.store.intendPark(jobsByEndpoint);
  }

  abandonPark(jobsByEndpoint: ReadonlyMap<string, readonly string[]>): Promise<void> {
    return this.store.abandonPark(jobsByEndpoint);
  }

  parkAfter(jobsByEndpoint: ReadonlyMap<string, readonly string[]>, move: () => Promise<unknown>): Promise<void> {
    return this.store.parkAfter(jobsByEndpoint, move);
  }

  throttle(endpointId: string, jobId: string, token: string, rate: number | null): Promise<number> {
    return this.store.throttle(endpointId, jobId, token, rate);
  }

  sweep(limit?: number): Promise<number> {
    return this.store.sweep(limit);
  }

  completeParks(limit?: number): Promise<number> {
    return this.store.completeParks(limit);
  }

  congested(endpointIds: readonly string[]): Promise<Set<string>> {
    return this.store.congested(endpointIds);
  }

  stats(): Promise<BacklogStats> {
    return this.store.stats();
  }

  windowOf(endpointId: string): Promise<number> {
    return this.store.windowOf(endpointId);
  }

  inUse(endpointId: string): Promise<number> {
    return this.store.inUse(endpointId);
  }
}

/**
 * Whether a job's run is fresh for the scheduler: its first run (BullMQ counts a run when the job
 * is taken) and added without a delay. A reservation is handed to a parked job and claimed when
 * that job runs after its promotion, and a job is parked either by the worker after a run of it or
 * by a producer that adds it delayed (`enqueueDeliveries`); so a fresh run's acquire skips looking
 * for its reservation. (Its id may still sit in a parked set: a producer re-enqueuing a delivery
 * whose job already waits or runs parks the id although BullMQ ignores the add; a release always
 * takes its job's id out.)
 */
export function isFreshJob(job: Pick<Job, "attemptsStarted" | "opts">): boolean {
  return job.attemptsStarted <= 1 && !(Number(job.opts.delay) > 0);
}

const stores = new WeakMap<Queue, Promise<EndpointSchedulerStore>>();

/** The producers' scheduler store of a shard queue (default options: producers only park and promote). */
export function schedulerOf(queue: Queue): Promise<EndpointSchedulerStore> {
  let store = stores.get(queue);
  if (!store) {
    store = EndpointSchedulerStore.forQueue(queue);
    stores.set(queue, store);
  }
  return store;
}

/** Backlog figures summed over shards: counts added, the oldest age the largest. */
export function sumBacklogStats(all: readonly BacklogStats[]): BacklogStats {
  return all.reduce(
    (sum, s) => ({
      backloggedEndpoints: sum.backloggedEndpoints + s.backloggedEndpoints,
      parkedJobs: sum.parkedJobs + s.parkedJobs,
      oldestParkedAgeSeconds: Math.max(sum.oldestParkedAgeSeconds, s.oldestParkedAgeSeconds),
    }),
    { backloggedEndpoints: 0, parkedJobs: 0, oldestParkedAgeSeconds: 0 },
  );
}
