/**
 * The Redis side of the per-endpoint scheduling of one deliveries shard (see endpoint-scheduler.ts
 * for what it is for, and endpoint-scheduler.lua.ts for the keys and scripts): windows as leases,
 * parked sets, the throttle, the sweep, the backlog figures. Every decision is one script call, so
 * worker replicas and producers share it; nothing here keeps state in the process beyond the
 * batching of one event-loop turn's slot operations into one call. The in-process policy (how long
 * a job waits for a slot before it parks) is {@link SlotWaitPolicy}'s.
 */
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { INITIAL_WINDOW, PARK_LUA, ROUTE_LUA, SLOTS_LUA, STATS_LUA, SWEEP_LUA, THROTTLE_LUA } from "./endpoint-scheduler.lua.js";
import { writeTogetherThisTurn } from "./turn-writes.js";


/** How an attempt ended, for the endpoint's window. */
export type WindowSignal = "answered" | "unresponsive" | "throttled" | "none";

/** Tuning of the endpoint scheduler; the defaults suit producers, the worker passes its config. */
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
  /** Wall clock of the park intents (shared by every process: wall time, not a monotonic one). Default `Date.now`. */
  now?: () => number;
}

/** What {@link EndpointSchedulerStore.acquire} decided. */
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

/**
 * Scripts that name their keys from a base take one key anyway, the shard's backlog index: every
 * key they touch shares its hash tag, and Redis Cluster routes the call by it.
 */
const SCRIPTS: [keyof Commands, number, string][] = [
  ["vwSchedSlots", 1, SLOTS_LUA],
  ["vwSchedPark", 5, PARK_LUA],
  ["vwSchedThrottle", 2, THROTTLE_LUA],
  ["vwSchedSweep", 1, SWEEP_LUA],
  ["vwSchedRoute", 1, ROUTE_LUA],
  ["vwSchedStats", 1, STATS_LUA],
];

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

/** The scheduler state of one deliveries shard queue, in Redis; see the module comment. */
export class EndpointSchedulerStore {
  /** Key base: `<bull prefix>:<queue>:sched:`, so the queue's keys and ours share one namespace. */
  readonly base: string;
  private readonly maxWindow: number;
  private readonly slowWindow: number;
  private readonly leaseTtlMs: number;
  readonly parkTimeoutMs: number;
  private readonly parkIntentGraceMs: number;
  private readonly now: () => number;
  /** Acquires and releases asked for during this event-loop turn, sent together at its end. */
  private slotOps: SlotOp[] = [];
  private slotOpsScheduled = false;

  private constructor(
    readonly queue: Queue,
    private readonly redis: Redis & Commands,
    options: EndpointSchedulerOptions,
  ) {
    this.base = `${queue.qualifiedName}:sched:`;
    this.maxWindow = options.maxWindow ?? 10;
    this.slowWindow = Math.min(options.slowWindow ?? 2, this.maxWindow);
    this.leaseTtlMs = options.leaseTtlMs ?? 20_000;
    this.parkTimeoutMs = options.parkTimeoutMs ?? 3_600_000;
    this.parkIntentGraceMs = options.parkIntentGraceMs ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** A store on the queue's own Redis connection (the scripts are defined on it once). */
  static async forQueue(queue: Queue, options: EndpointSchedulerOptions = {}): Promise<EndpointSchedulerStore> {
    const client = (await queue.getBackend().client) as unknown as Redis & Partial<Commands>;
    for (const [name, numberOfKeys, lua] of SCRIPTS) {
      if (typeof client[name] !== "function") client.defineCommand(name, { numberOfKeys, lua });
    }
    return new EndpointSchedulerStore(queue, client as Redis & Commands, options);
  }

  private keys(endpointId: string): [string, string, string, string] {
    const ep = `${this.base}ep:${endpointId}`;
    return [ep, `${ep}:leases`, `${ep}:parked`, `${this.base}backlogged`];
  }

  /** The key scripts without KEYS of their own are routed by (same hash tag as every key here). */
  private get routeKey(): string {
    return `${this.base}backlogged`;
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
    const at = this.now();
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
    await this.releaseMember(endpointId, `${jobId}:${token}`, jobId, signal);
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
    const pairs = (await this.redis.vwSchedSweep(this.routeKey, this.base, this.leaseTtlMs, limit)) as string[];
    for (let i = 0; i < pairs.length; i += 2) await this.promote(pairs[i] as string, [pairs[i + 1] as string]);
    return pairs.length / 2;
  }

  /**
   * Parks the jobs of intents older than the grace: their process died after moving them to the
   * delayed set and before parking them. A job not in the delayed state (its move never happened,
   * or it has run since) only loses its intent. Returns how many jobs it parked.
   */
  async completeParks(limit = 500): Promise<number> {
    const stale = await this.redis.zrangebyscore(this.parkingKey, "-inf", this.now() - this.parkIntentGraceMs, "LIMIT", 0, limit);
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
    const flags = (await this.redis.vwSchedRoute(this.routeKey, this.base, ...endpointIds)) as number[];
    return new Set(endpointIds.filter((_, i) => Number(flags[i]) === 1));
  }

  /**
   * Holds this connection's writes until the end of the event-loop turn (turn-writes.ts): a
   * producer's calls for every shard of one batch then leave in one write.
   */
  writeTogetherThisTurn(): void {
    writeTogetherThisTurn(this.redis);
  }

  /** Backlog figures (metrics). */
  async stats(): Promise<BacklogStats> {
    const [n, oldest, parked, now] = (await this.redis.vwSchedStats(this.routeKey, this.base, 1000)) as [number, string, number, number];
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
      this.redis.vwSchedSlots(this.routeKey, this.base, this.leaseTtlMs, this.maxWindow, this.slowWindow, ...ops.flatMap((op) => op.fields)).then(
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
