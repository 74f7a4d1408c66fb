/**
 * The deliveries queue, in shards: `QUEUE_SHARDS` BullMQ queues (default 16), each under its own
 * hash tag, so on Redis Cluster each shard's keys live in one slot and the shards spread over the
 * primaries (adding primaries adds capacity). An endpoint's jobs and its scheduler keys (windows,
 * leases, throttle, parked jobs: endpoint-scheduler.ts) all live in one shard, the endpoint's: a
 * stable hash of its id. On a standalone Redis or behind Sentinel the shards cost nothing more
 * than their keys.
 *
 * A shard layout is named by its shard count: shard `i` of `n` has the hash tag `dlv<n>.<i>.<k>`,
 * with the first `k` that puts its slot in the `i`-th `n`-th of the slot range, so a Cluster whose
 * primaries hold equal slot ranges gets an equal share of the shards. Changing `QUEUE_SHARDS`
 * therefore starts a new key space: its index markers are missing, and the reconciler rebuilds
 * the dispatch index from PostgreSQL into it; the layouts registry (one Redis set) tells workers
 * which other layouts may still hold jobs to drain, and every process that queues or serves
 * deliveries keeps its layout marked in use, so none is retired while a process may still queue
 * into it (see the delivery-worker README).
 */
import type { Job, JobType, Queue } from "bullmq";
import { QUEUE_NAMES } from "./catalogue.js";
import { openQueue } from "./connection.js";
import { CLUSTER_SLOTS, crc16 } from "./key-slots.js";
import type { EnvReader } from "@vw/service-kit";
import type { Cluster, Redis } from "ioredis";
import type { RedisClient } from "./redis-connection.js";

/** Default QUEUE_SHARDS. */
export const DEFAULT_QUEUE_SHARDS = 16;
/** Largest QUEUE_SHARDS accepted (each shard is a BullMQ queue every worker serves). */
export const MAX_QUEUE_SHARDS = 256;

/** The shard (0 to `shards` - 1) of an endpoint: FNV-1a of its id, stable across processes and versions. */
export function shardOf(endpointId: string, shards: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < endpointId.length; i++) {
    hash ^= endpointId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}

/** The hash tag of shard `index` of a layout of `shards` (see the file comment). */
export function shardTag(index: number, shards: number): string {
  const low = Math.floor((index * CLUSTER_SLOTS) / shards);
  const high = Math.floor(((index + 1) * CLUSTER_SLOTS) / shards);
  for (let k = 0; ; k++) {
    const tag = `dlv${shards}.${index}.${k}`;
    const slot = crc16(tag) % CLUSTER_SLOTS;
    if (slot >= low && slot < high) return tag;
  }
}

/** The deliveries queue of one layout: one BullMQ queue per shard, all named `QUEUE_NAMES.deliveries`. */
export class DeliveryQueues {
  /** One queue handle per shard, by index. */
  readonly shards: readonly Queue[];

  constructor(
    connection: RedisClient,
    readonly keyPrefix: string,
    /** Shards of this layout (QUEUE_SHARDS). */
    readonly count: number = DEFAULT_QUEUE_SHARDS,
  ) {
    if (!Number.isInteger(count) || count < 1 || count > MAX_QUEUE_SHARDS) throw new RangeError(`shard count must be 1-${MAX_QUEUE_SHARDS}, got ${count}`);
    this.shards = Array.from({ length: count }, (_, i) => openQueue(QUEUE_NAMES.deliveries, connection, keyPrefix, shardTag(i, count)));
  }

  /** The endpoint's shard index. */
  shardOf(endpointId: string): number {
    return shardOf(endpointId, this.count);
  }

  /** The queue of the endpoint's shard. */
  queueFor(endpointId: string): Queue {
    return this.shards[this.shardOf(endpointId)] as Queue;
  }

  /** Groups items by the shard of their endpoint (shards without items are left out). */
  byShard<T extends { endpointId: string }>(items: readonly T[]): Map<Queue, T[]> {
    const groups = new Map<Queue, T[]>();
    for (const item of items) {
      const queue = this.queueFor(item.endpointId);
      const group = groups.get(queue);
      if (group) group.push(item);
      else groups.set(queue, [item]);
    }
    return groups;
  }

  /** Waits until every shard's handle is connected. */
  async waitUntilReady(): Promise<void> {
    await Promise.all(this.shards.map((q) => q.waitUntilReady()));
  }

  /** Listens to an event of every shard's handle (`error`, say). */
  on(event: "error", listener: (err: Error) => void): this {
    for (const q of this.shards) q.on(event, listener);
    return this;
  }

  /** Job counts summed over the shards. */
  async getJobCounts(...types: JobType[]): Promise<Record<string, number>> {
    const all = await Promise.all(this.shards.map((q) => q.getJobCounts(...types)));
    const sum: Record<string, number> = {};
    for (const counts of all) for (const [state, n] of Object.entries(counts)) sum[state] = (sum[state] ?? 0) + n;
    return sum;
  }

  /** Jobs of these states in every shard (operator views and tests; no order across shards). */
  async getJobs(types: JobType[]): Promise<Job[]> {
    return (await Promise.all(this.shards.map((q) => q.getJobs(types)))).flat();
  }

  /** A job by id, from whichever shard holds it. */
  async getJob(jobId: string): Promise<Job | undefined> {
    for (const q of this.shards) {
      const job = (await q.getJob(jobId)) as Job | undefined;
      if (job) return job;
    }
    return undefined;
  }

  /** Pauses every shard (for every worker). */
  async pause(): Promise<void> {
    await Promise.all(this.shards.map((q) => q.pause()));
  }

  /** Resumes every shard. */
  async resume(): Promise<void> {
    await Promise.all(this.shards.map((q) => q.resume()));
  }

  /** Removes every shard's keys (tests, and an operator clearing a deployment). */
  async obliterate(opts?: { force?: boolean }): Promise<void> {
    await Promise.all(this.shards.map((q) => q.obliterate(opts)));
  }

  /** Closes every shard's handle (not the connection). */
  async close(): Promise<void> {
    await Promise.all(this.shards.map((q) => q.close()));
  }
}

/** Opens the deliveries queue's shards of the layout `shards` on an existing connection. */
export function openDeliveryQueues(connection: RedisClient, keyPrefix: string, shards: number = DEFAULT_QUEUE_SHARDS): DeliveryQueues {
  return new DeliveryQueues(connection, keyPrefix, shards);
}

/** The layouts registry: shard counts whose queues may still hold jobs (one set, one slot). */
export function layoutsKey(keyPrefix: string): string {
  return `${keyPrefix.replace(/:+$/, "")}:dispatch:layouts`;
}

/** Records that layout `shards` is in use; resolves with the other layouts recorded (to drain). */
export async function registerLayout(redis: RedisClient, keyPrefix: string, shards: number): Promise<number[]> {
  await redis.sadd(layoutsKey(keyPrefix), String(shards));
  return otherLayouts(redis, keyPrefix, shards);
}

/** The layouts recorded besides `shards`, in order. */
export async function otherLayouts(redis: RedisClient, keyPrefix: string, shards: number): Promise<number[]> {
  const all = await redis.smembers(layoutsKey(keyPrefix));
  return all.map(Number).filter((n) => Number.isInteger(n) && n >= 1 && n <= MAX_QUEUE_SHARDS && n !== shards).sort((a, b) => a - b);
}

/** Forgets a drained layout (its queues hold no job any more). */
export async function retireLayout(redis: RedisClient, keyPrefix: string, shards: number): Promise<void> {
  await redis.srem(layoutsKey(keyPrefix), String(shards));
}

/** How often a process that queues into or serves a layout says so ({@link keepAnnouncingLayout}). */
export const LAYOUT_ANNOUNCE_MS = 5000;
/** How long a layout counts as in use after it was last announced: three announcements missed. */
export const LAYOUT_IN_USE_MS = 3 * LAYOUT_ANNOUNCE_MS;

/** The key that says a layout is in use (it expires when no process announces the layout any more). */
export function layoutInUseKey(keyPrefix: string, shards: number): string {
  return `${keyPrefix.replace(/:+$/, "")}:dispatch:layout-in-use:${shards}`;
}

/** Records layout `shards` in the registry and marks it in use for {@link LAYOUT_IN_USE_MS}. */
export async function announceLayout(redis: RedisClient, keyPrefix: string, shards: number): Promise<void> {
  await redis.sadd(layoutsKey(keyPrefix), String(shards));
  await redis.set(layoutInUseKey(keyPrefix, shards), "1", "PX", LAYOUT_IN_USE_MS);
}

/**
 * Announces the layout now and every {@link LAYOUT_ANNOUNCE_MS} until stopped: every process that
 * queues deliveries (event-ingest, admin-api) or serves them does, so a layout still used by a
 * process of an earlier `QUEUE_SHARDS` (a rollout under way) is not retired while that process
 * may still queue into it. A failed announcement (Redis unavailable) is reported and tried again
 * at the next one.
 */
export function keepAnnouncingLayout(redis: RedisClient, keyPrefix: string, shards: number, onError: (err: Error) => void): { stop(): void } {
  const announce = () => void announceLayout(redis, keyPrefix, shards).catch(onError);
  // At once when connected (before this process queues anything), and again after each reconnection.
  if (redis.status === "ready") announce();
  redis.on("ready", announce);
  const timer = setInterval(announce, LAYOUT_ANNOUNCE_MS);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      redis.off("ready", announce);
    },
  };
}

/** Whether a process announced layout `shards` within the last {@link LAYOUT_IN_USE_MS}. */
export async function layoutInUse(redis: RedisClient, keyPrefix: string, shards: number): Promise<boolean> {
  return (await redis.exists(layoutInUseKey(keyPrefix, shards))) === 1;
}

/**
 * Deletes every key of a layout's shards: BullMQ's (finished jobs kept for inspection included),
 * the scheduler's and the index marker, all under each shard's `<prefix>:{<tag>}:<queue>:`. For a
 * retired layout only, whose workers are closed: each shard's keys are found by SCAN on the node
 * that holds them (every primary of a Cluster), and deleted in batches of one slot.
 */
export async function clearLayout(redis: RedisClient, queues: DeliveryQueues): Promise<void> {
  const nodes = redis.isCluster ? (redis as Cluster).nodes("master") : [redis as Redis];
  for (const queue of queues.shards) {
    const match = `${queue.qualifiedName.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}:*`;
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", match, "COUNT", 1000);
        cursor = next;
        if (keys.length > 0) await redis.del(...keys);
      } while (cursor !== "0");
    }
  }
}

/** Whether every shard of a layout is empty: nothing waiting, delayed, prioritized or running. */
export async function layoutDrained(queues: DeliveryQueues): Promise<boolean> {
  const counts = await Promise.all(queues.shards.map((q) => q.getJobCounts("wait", "delayed", "prioritized", "active", "waiting-children")));
  return counts.every((c) => Object.values(c).every((n) => n === 0));
}

/**
 * QUEUE_SHARDS (1-256, default 16), read alike by every service that queues or serves deliveries:
 * producers and workers must agree on it (a producer on another count queues into a layout the
 * workers drain, not one they serve; see the delivery-worker README on changing it).
 */
export function readQueueShards(r: Pick<EnvReader, "int">): number {
  return r.int("QUEUE_SHARDS", DEFAULT_QUEUE_SHARDS, { min: 1, max: MAX_QUEUE_SHARDS });
}
