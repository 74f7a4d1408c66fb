/**
 * The deliveries queue, in shards: `QUEUE_SHARDS` BullMQ queues (default 16), each under its own
 * hash tag, so on Redis Cluster each shard's keys live in one slot and the shards spread over the
 * primaries (adding primaries adds capacity). An endpoint's drain and timer jobs, its dirty flag
 * and its stored window (drain-signals.ts) all live in one shard, the endpoint's: a stable hash of
 * its id. On a standalone Redis or behind Sentinel the shards cost nothing more than their keys.
 *
 * A shard layout is named by its shard count: shard `i` of `n` has the hash tag `dlv<n>.<i>.<k>`,
 * with the first `k` that puts its slot in the `i`-th `n`-th of the slot range, so a Cluster whose
 * primaries hold equal slot ranges gets an equal share of the shards. Changing `QUEUE_SHARDS`
 * therefore starts a new key space: its index markers are missing, and the reconciler wakes every
 * endpoint with pending deliveries into it from PostgreSQL; what a process still on the old count
 * wakes in the old key space is woken again by the reconciler's sweep (see the delivery-worker
 * README).
 */
import type { Job, JobType, Queue } from "bullmq";
import { QUEUE_NAMES } from "./catalogue.js";
import { openQueue } from "./connection.js";
import { CLUSTER_SLOTS, crc16 } from "./key-slots.js";
import type { EnvReader } from "@vw/service-kit";
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

/**
 * QUEUE_SHARDS (1-256, default 16), read alike by every service that queues or serves deliveries:
 * producers and workers must agree on it (a producer on another count wakes endpoints in a layout
 * the workers do not serve, left to the reconciler's sweep; see the delivery-worker README on
 * changing it).
 */
export function readQueueShards(r: Pick<EnvReader, "int">): number {
  return r.int("QUEUE_SHARDS", DEFAULT_QUEUE_SHARDS, { min: 1, max: MAX_QUEUE_SHARDS });
}
