/**
 * Per-endpoint scheduling of the deliveries queue, shared by every worker replica and producer:
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
 * The job stays a BullMQ job throughout (at least once, retries, infrastructure backoff and stalled
 * recovery are BullMQ's): only the decision of when it may go to the wait list is ours.
 */
import type { Job, Queue } from "bullmq";
import type { Redis } from "ioredis";
import { INITIAL_WINDOW, PARK_LUA, ROUTE_LUA, SLOTS_LUA, STATS_LUA, SWEEP_LUA, THROTTLE_LUA } from "./endpoint-scheduler.lua.js";

export { INITIAL_WINDOW } from "./endpoint-scheduler.lua.js";

/** How an attempt ended, for the endpoint's window. */
export type WindowSignal = "answered" | "unresponsive" | "throttled" | "none";

/** Tuning of {@link EndpointScheduler}; the defaults suit producers, the worker passes its config. */
export interface EndpointSchedulerOptions {
  /** Largest window per endpoint (DELIVERY_ENDPOINT_CONCURRENCY). Default 10. */
  maxWindow?: number;
  /** Window after a timeout or connection error. Default 2. */
  slowWindow?: number;
  /** How long a slot may stay taken without being released: the attempt timeout plus a margin. Default 20 s. */
  leaseTtlMs?: number;
  /** Delay of a parked job in BullMQ's delayed set: the safety net if its promotion is ever lost. Default 1 h. */
  parkTimeoutMs?: number;
  /**
   * How old a park intent must be before the sweep completes it (the job was moved to the delayed
   * set by a process that died before parking it). Default 10 s: a park normally follows its
   * intent within milliseconds.
   */
  parkIntentGraceMs?: number;
}

/** What {@link EndpointScheduler.acquire} decided. */
export interface Acquired {
  granted: boolean;
  /** Before starting the attempt (the throttle's reserved start), in ms. */
  waitMs: number;
  /** The rate the throttle applied (0 = none); compared with the endpoint row after it is read. */
  rate: number;
  /**
   * Refused because the endpoint has parked jobs (its backlog): the job must queue behind them.
   * Otherwise a refusal only means every slot is taken, and one may free within milliseconds.
   */
  backlogged: boolean;
}

/** Backlog figures for the operator. */
export interface BacklogStats {
  backloggedEndpoints: number;
  /** Parked jobs, summed over the first 1000 backlogged endpoints. */
  parkedJobs: number;
  /** How long the oldest parked job has waited, in seconds (0 without a backlog). */
  oldestParkedAgeSeconds: number;
}

type Script = (...args: (string | number)[]) => Promise<unknown>;
type Commands = Record<"vwSchedSlots" | "vwSchedPark" | "vwSchedThrottle" | "vwSchedSweep" | "vwSchedRoute" | "vwSchedStats", Script>;

const SCRIPTS: [keyof Commands, number, string][] = [
  ["vwSchedSlots", 0, SLOTS_LUA],
  ["vwSchedPark", 5, PARK_LUA],
  ["vwSchedThrottle", 2, THROTTLE_LUA],
  ["vwSchedSweep", 0, SWEEP_LUA],
  ["vwSchedRoute", 0, ROUTE_LUA],
  ["vwSchedStats", 0, STATS_LUA],
];

/** How often {@link EndpointScheduler.acquireWithin} asks again without a local release (other replicas' releases). */
export const SLOT_POLL_MS = 20;

/**
 * How much longer than its `withinMs` {@link EndpointScheduler.acquireWithin} waits for an endpoint
 * that answered recently: until this many times `withinMs` have passed since its last answer (and
 * since the job began to wait).
 */
export const ANSWERING_WAIT_FACTOR = 5;

/** Endpoints whose last answer {@link EndpointScheduler} remembers; past this, the oldest half is forgotten. */
const MAX_ANSWERED_REMEMBERED = 10_000;

/** Most acquires and releases sent in one script call; more wait for the next call. */
const MAX_SLOT_OPS = 200;

/** An acquire or release waiting for this turn's script call: its six ARGV fields and its caller. */
interface SlotOp {
  fields: [kind: "a" | "r", endpointId: string, member: string, jobId: string, signal: string, fresh: "1" | ""];
  resolve: (reply: unknown) => void;
  reject: (err: unknown) => void;
}

/** BullMQ's answer when promoting a job that is not in the delayed set. */
function isNotDelayed(err: unknown): boolean {
  return err instanceof Error && /is not in the delayed state/.test(err.message);
}

/** The scheduler of one deliveries queue; see the module comment. */
export class EndpointScheduler {
  /** Key base: `<bull prefix>:<queue>:sched:`, so the queue's keys and ours share one namespace. */
  readonly base: string;
  private readonly maxWindow: number;
  private readonly slowWindow: number;
  private readonly leaseTtlMs: number;
  readonly parkTimeoutMs: number;
  private readonly parkIntentGraceMs: number;
  /** This process's jobs waiting in {@link acquireWithin}, oldest first, by endpoint. */
  private readonly waiters = new Map<string, (() => void)[]>();
  /** When an attempt of this process last got an answer from each endpoint (oldest first). */
  private readonly answeredAt = new Map<string, number>();
  /** Acquires and releases asked for during this event-loop turn, sent together at its end. */
  private slotOps: SlotOp[] = [];
  private slotOpsScheduled = false;

  private constructor(
    private readonly queue: Queue,
    private readonly redis: Redis & Commands,
    options: EndpointSchedulerOptions,
  ) {
    this.base = `${queue.qualifiedName}:sched:`;
    this.maxWindow = options.maxWindow ?? 10;
    this.slowWindow = Math.min(options.slowWindow ?? 2, this.maxWindow);
    this.leaseTtlMs = options.leaseTtlMs ?? 20_000;
    this.parkTimeoutMs = options.parkTimeoutMs ?? 3_600_000;
    this.parkIntentGraceMs = options.parkIntentGraceMs ?? 10_000;
  }

  /** A scheduler on the queue's own Redis connection (the scripts are defined on it once). */
  static async forQueue(queue: Queue, options: EndpointSchedulerOptions = {}): Promise<EndpointScheduler> {
    const client = (await queue.getBackend().client) as unknown as Redis & Partial<Commands>;
    for (const [name, numberOfKeys, lua] of SCRIPTS) {
      if (typeof client[name] !== "function") client.defineCommand(name, { numberOfKeys, lua });
    }
    return new EndpointScheduler(queue, client as Redis & Commands, options);
  }

  private keys(endpointId: string): [string, string, string, string] {
    const ep = `${this.base}ep:${endpointId}`;
    return [ep, `${ep}:leases`, `${ep}:parked`, `${this.base}backlogged`];
  }

  /** The park intents (see {@link intendPark}). */
  private get parkingKey(): string {
    return `${this.base}parking`;
  }

  /**
   * Takes a slot for the job's attempt, or says it must park. `token` is BullMQ's lock token of
   * this run of the job (one lease per run, so a stalled job taken over never shares a lease).
   * `fresh`: the job is on its first run and was never delayed (see {@link isFreshJob}), so it
   * can hold no reservation and Redis skips looking for one; when unsure, leave it false.
   */
  async acquire(endpointId: string, jobId: string, token: string, fresh = false): Promise<Acquired> {
    const res = (await this.slotOp(["a", endpointId, `${jobId}:${token}`, jobId, "", fresh ? "1" : ""])) as (number | string)[];
    await this.promote(endpointId, res.slice(4).map(String));
    return { granted: Number(res[0]) === 1, waitMs: Number(res[1]), rate: Number(res[2]), backlogged: Number(res[3]) === 1 };
  }

  /**
   * {@link acquire}, and when the endpoint's window is merely full (no backlog), waits for a slot
   * instead of giving up: woken by this process's releases of the endpoint, and asking again every
   * {@link SLOT_POLL_MS} for other replicas'. A fast endpoint at its window frees a slot within
   * milliseconds, and parking its job would cost a park, a promotion and a second fetch; worse,
   * during a burst the promoted job waits behind the whole wait list while it holds its
   * reservation, so every later job of that endpoint parks too.
   *
   * It waits `withinMs`, or, for an endpoint that answered one of this process's attempts within
   * the last {@link ANSWERING_WAIT_FACTOR} x `withinMs`, until that long has passed since its last
   * answer (and at most that long in all). On a machine short of CPU, all of a fast endpoint's
   * attempts in flight can stall for a few hundred milliseconds (the worker's or the receiver's
   * process not running); with a flat 200 ms, `pnpm bench backlog`'s two stacks on two cores then
   * parked healthy jobs in cascades (seen as far more Redis commands per delivery). An
   * endpoint that has not answered lately (hung, timing out, or new) still parks its jobs after
   * `withinMs`: a waiting job holds one of the worker's slots, which others need. Refused then, or
   * as soon as the endpoint has parked jobs (FIFO: this job queues behind them).
   */
  async acquireWithin(endpointId: string, jobId: string, token: string, withinMs: number, fresh = false): Promise<Acquired> {
    const started = Date.now();
    const longest = withinMs * ANSWERING_WAIT_FACTOR;
    let slot = await this.acquire(endpointId, jobId, token, fresh);
    while (!slot.granted && !slot.backlogged) {
      const answered = this.answeredAt.get(endpointId);
      const deadline = answered === undefined ? started + withinMs : Math.max(started + withinMs, Math.min(answered, started) + longest);
      const left = deadline - Date.now();
      if (left <= 0) break;
      await this.slotFreed(endpointId, Math.min(SLOT_POLL_MS, left));
      slot = await this.acquire(endpointId, jobId, token, fresh);
    }
    return slot;
  }

  /** Remembers that the endpoint answered an attempt of this process just now (see {@link acquireWithin}). */
  private noteAnswer(endpointId: string): void {
    this.answeredAt.delete(endpointId); // re-inserted last: the map stays oldest first
    this.answeredAt.set(endpointId, Date.now());
    if (this.answeredAt.size > MAX_ANSWERED_REMEMBERED) {
      let drop = this.answeredAt.size / 2;
      for (const key of this.answeredAt.keys()) {
        if (drop-- <= 0) break;
        this.answeredAt.delete(key);
      }
    }
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
        clearTimeout(timer);
        const at = list.indexOf(wake);
        if (at >= 0) list.splice(at, 1);
        if (list.length === 0 && this.waiters.get(endpointId) === list) this.waiters.delete(endpointId);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      list.push(wake);
    });
  }

  /**
   * Parks jobs that are already in BullMQ's delayed set (moved there by the worker, or added
   * delayed by a producer), then promotes whatever free slots allow, possibly those same jobs.
   */
  async park(endpointId: string, jobIds: readonly string[]): Promise<void> {
    if (jobIds.length === 0) return;
    const ids = (await this.redis.vwSchedPark(...this.keys(endpointId), this.parkingKey, endpointId, this.leaseTtlMs, ...jobIds)) as string[];
    await this.promote(endpointId, ids);
  }

  /**
   * Records that these jobs, by endpoint, are about to be parked (one command for all of them),
   * before they are moved to (or added to) the delayed set: a process that dies between that move
   * and {@link park} would otherwise leave them delayed for the whole park timeout (an hour),
   * parked nowhere. The park drops the intents; the sweep completes those left behind.
   */
  async intendPark(jobsByEndpoint: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const members = intentMembers(jobsByEndpoint);
    if (members.length === 0) return;
    const at = Date.now();
    await this.redis.zadd(this.parkingKey, ...members.flatMap((member) => [at, member]));
  }

  /** Drops intents whose park will not happen (the move to the delayed set failed). */
  async abandonPark(jobsByEndpoint: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const members = intentMembers(jobsByEndpoint);
    if (members.length > 0) await this.redis.zrem(this.parkingKey, ...members);
  }

  /**
   * The whole park of jobs that `move` puts into BullMQ's delayed set (the worker's
   * `moveToDelayed`, a producer's delayed add), by endpoint: their intents first, then the move,
   * then {@link park}. A move that fails drops the intents and rethrows; a process dying after the
   * move leaves them to the sweep.
   */
  async parkAfter(jobsByEndpoint: ReadonlyMap<string, readonly string[]>, move: () => Promise<unknown>): Promise<void> {
    await this.intendPark(jobsByEndpoint);
    try {
      await move();
    } catch (err) {
      await this.abandonPark(jobsByEndpoint).catch(() => undefined);
      throw err;
    }
    for (const [endpointId, jobIds] of jobsByEndpoint) await this.park(endpointId, jobIds);
  }

  /** Gives the job's slot back, adapts the window to the signal, and promotes parked jobs into freed slots. */
  async release(endpointId: string, jobId: string, token: string, signal: WindowSignal): Promise<void> {
    if (signal === "answered") this.noteAnswer(endpointId);
    try {
      await this.releaseMember(endpointId, `${jobId}:${token}`, jobId, signal);
    } finally {
      // The oldest job of this process waiting for a slot of the endpoint asks again now.
      this.waiters.get(endpointId)?.[0]?.();
    }
  }

  /**
   * Records the rate read from the endpoint row when it differs from the one {@link acquire}
   * applied (a first attempt, or a PATCH since), and reserves this attempt's start under it.
   * Returns how long to wait before starting.
   */
  async throttle(endpointId: string, jobId: string, token: string, rate: number | null): Promise<number> {
    const [ep, leases] = this.keys(endpointId);
    return Number(await this.redis.vwSchedThrottle(ep, leases, `${jobId}:${token}`, rate ?? 0, this.leaseTtlMs));
  }

  /**
   * Completes the parks a dead process left half done ({@link completeParks}), takes back the
   * slots of dead workers (expired leases) and of promotions lost to a crash, and hands them to
   * parked jobs; run periodically by every worker. Visits the `limit` oldest backlogged endpoints.
   * Returns the promotions of the second part.
   */
  async sweep(limit = 500): Promise<number> {
    await this.completeParks(limit);
    const pairs = (await this.redis.vwSchedSweep(this.base, this.leaseTtlMs, limit)) as string[];
    for (let i = 0; i < pairs.length; i += 2) await this.promote(pairs[i] as string, [pairs[i + 1] as string]);
    return pairs.length / 2;
  }

  /**
   * Parks the jobs of intents older than the grace: their process died after moving them to the
   * delayed set and before parking them. A job not in the delayed state (its move never happened,
   * or it has run since) only loses its intent. Returns how many jobs it parked.
   */
  async completeParks(limit = 500): Promise<number> {
    const stale = await this.redis.zrangebyscore(this.parkingKey, "-inf", Date.now() - this.parkIntentGraceMs, "LIMIT", 0, limit);
    let parked = 0;
    for (const intent of stale) {
      const at = intent.indexOf("/");
      const endpointId = intent.slice(0, at);
      const jobId = intent.slice(at + 1);
      if ((await this.queue.getJobState(jobId)) === "delayed") {
        await this.park(endpointId, [jobId]);
        parked += 1;
      } else {
        await this.redis.zrem(this.parkingKey, intent);
      }
    }
    return parked;
  }

  /** Endpoints among these whose new jobs should be parked at once (jobs parked, or every slot taken). */
  async congested(endpointIds: readonly string[]): Promise<Set<string>> {
    if (endpointIds.length === 0) return new Set();
    const flags = (await this.redis.vwSchedRoute(this.base, ...endpointIds)) as number[];
    return new Set(endpointIds.filter((_, i) => Number(flags[i]) === 1));
  }

  /** Backlog figures (metrics). */
  async stats(): Promise<BacklogStats> {
    const [n, oldest, parked, now] = (await this.redis.vwSchedStats(this.base, 1000)) as [number, string, number, number];
    const oldestMs = Number(oldest) / 1000;
    return {
      backloggedEndpoints: Number(n),
      parkedJobs: Number(parked),
      oldestParkedAgeSeconds: oldestMs > 0 ? Math.max(0, (Number(now) - oldestMs) / 1000) : 0,
    };
  }

  /** The endpoint's current window (tests, diagnostics). */
  async windowOf(endpointId: string): Promise<number> {
    const win = await this.redis.hget(this.keys(endpointId)[0], "win");
    return Math.min(win === null ? INITIAL_WINDOW : Number(win), this.maxWindow);
  }

  /** Slots in use (attempts in flight plus reservations) for the endpoint (tests, diagnostics). */
  async inUse(endpointId: string): Promise<number> {
    return this.redis.zcard(this.keys(endpointId)[1]);
  }

  private async releaseMember(endpointId: string, member: string, jobId: string, signal: WindowSignal): Promise<void> {
    const ids = (await this.slotOp(["r", endpointId, member, jobId, signal, ""])) as string[];
    await this.promote(endpointId, ids);
  }

  /**
   * Queues an acquire or release for the script call at the end of this event-loop turn (one round
   * trip for every slot decision of the turn, applied in the order asked), and resolves with its
   * own reply.
   */
  private slotOp(fields: SlotOp["fields"]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.slotOps.push({ fields, resolve, reject });
      if (!this.slotOpsScheduled) {
        this.slotOpsScheduled = true;
        setImmediate(() => this.sendSlotOps());
      }
    });
  }

  private sendSlotOps(): void {
    this.slotOpsScheduled = false;
    while (this.slotOps.length > 0) {
      const ops = this.slotOps.splice(0, MAX_SLOT_OPS);
      this.redis.vwSchedSlots(this.base, this.leaseTtlMs, this.maxWindow, this.slowWindow, ...ops.flatMap((op) => op.fields)).then(
        (replies) => ops.forEach((op, i) => op.resolve((replies as unknown[])[i])),
        (err: unknown) => ops.forEach((op) => op.reject(err)),
      );
    }
  }

  /**
   * Moves jobs handed a slot from the delayed set to the wait list. One that is not delayed
   * (already taken over by a worker, finished, removed) gives its reservation back at once, which
   * may hand the slot to the next parked job.
   */
  private async promote(endpointId: string, jobIds: readonly string[]): Promise<void> {
    for (const jobId of jobIds) {
      try {
        await this.queue.getBackend().promote(jobId);
      } catch (err) {
        if (!isNotDelayed(err)) throw err;
        await this.releaseMember(endpointId, `r:${jobId}`, jobId, "none");
      }
    }
  }
}

/** The park intents' members, `<endpointId>/<jobId>`, of jobs grouped by endpoint. */
function intentMembers(jobsByEndpoint: ReadonlyMap<string, readonly string[]>): string[] {
  return [...jobsByEndpoint].flatMap(([endpointId, jobIds]) => jobIds.map((id) => `${endpointId}/${id}`));
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

const schedulers = new WeakMap<Queue, Promise<EndpointScheduler>>();

/** The producers' scheduler of a queue (default options: producers only park and promote). */
export function schedulerOf(queue: Queue): Promise<EndpointScheduler> {
  let scheduler = schedulers.get(queue);
  if (!scheduler) {
    scheduler = EndpointScheduler.forQueue(queue);
    schedulers.set(queue, scheduler);
  }
  return scheduler;
}
