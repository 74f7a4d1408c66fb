/**
 * One socket write for what a connection sends during one event-loop turn. A request's wakes go to
 * up to QUEUE_SHARDS shard queues on one connection, each shard's commands sent on their own
 * (its wake script, its drain jobs' adds); a trickle of small requests then pays a write
 * system call per shard, and Redis a read per shard, for a command or two each. Corked until the
 * turn's callbacks and microtasks are done, they leave in one write, and Redis reads them at once
 * and answers in one write too. Nothing waits longer than the turn it was sent in. Unlike a
 * worker's connection, which coalesces every write per tick (redis-connection.ts), a producer's is
 * corked only by the calls that ask for it.
 */
import type { Redis } from "ioredis";
import type { RedisClient } from "./redis-connection.js";

/** Streams corked until the end of this turn. */
const corked = new WeakSet<object>();

/**
 * Holds `client`'s writes until the end of this event-loop turn (a `setImmediate`), then sends them
 * together. Once per turn however often it is called; nothing on a Cluster (a connection per node)
 * or a connection not ready (ioredis queues those commands itself).
 */
export function writeTogetherThisTurn(client: RedisClient): void {
  if (client.isCluster || client.status !== "ready") return;
  const stream = (client as Redis).stream as Redis["stream"] | undefined;
  if (!stream || corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  setImmediate(() => {
    corked.delete(stream);
    stream.uncork();
  });
}
