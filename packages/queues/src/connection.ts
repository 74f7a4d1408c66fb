/**
 * Redis connections and queue handles for BullMQ, one policy for every process:
 * - workers block on Redis and must survive its restarts, so their connection retries commands
 *   forever (`maxRetriesPerRequest: null`, BullMQ's requirement);
 * - producers answer HTTP requests, so they fail fast: a command that cannot be sent within one
 *   retry rejects, and the request gets a 503 instead of hanging.
 * `REDIS_URL` may carry a database number (`redis://host:6379/3`); ioredis honours it.
 */
import { Queue, type DefaultJobOptions } from "bullmq";
import { Redis } from "ioredis";

/** Which side of a queue the connection serves. */
export type RedisRole = "worker" | "producer";

/**
 * A Redis connection for BullMQ with the retry policy of its role. A worker's connection also
 * coalesces its socket writes per tick (`coalesceWritesPerTick`): a delivery's BullMQ and scheduler
 * calls are written together instead of one system call each.
 */
export function createRedisConnection(redisUrl: string, role: RedisRole): Redis {
  if (role === "producer") return new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 5000 });
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null, enableReadyCheck: true });
  coalesceWritesPerTick(redis);
  return redis;
}

/**
 * Makes every socket this connection opens (the first and each one after a reconnect) gather the
 * commands written within one tick of the event loop (the synchronous code and the promise
 * continuations it starts) into one write: the socket is corked at the tick's first write and
 * uncorked on `process.nextTick`. The bytes and their order are exactly what ioredis wrote, so
 * replies still match commands one by one; only the number of system calls changes. Alternated
 * runs of `pnpm bench delivery` with and without it measured a small saving of CPU per delivery
 * (docs/decisions/0009-worker-redis-writes-coalesced-per-tick.md). This is not ioredis's
 * `enableAutoPipelining`, which rebuilds commands into pipelines and with which Bull's users saw
 * job data lost; corking is below ioredis and cannot change what is sent. A connection BullMQ
 * duplicates for blocking reads is a new connection and sends one command at a time; it is left
 * alone.
 */
function coalesceWritesPerTick(redis: Redis): void {
  redis.on("connect", () => {
    const socket = redis.stream;
    const write = socket.write;
    let corked = false;
    const uncork = (): void => {
      corked = false;
      socket.uncork();
    };
    socket.write = function (this: typeof socket, ...args: Parameters<typeof write>) {
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(uncork);
      }
      return write.apply(this, args);
    } as typeof write;
  });
}

/** BullMQ key prefix for a deployment's key prefix (`REDIS_KEY_PREFIX`, default `vw`). */
export function bullPrefix(keyPrefix: string): string {
  return `${keyPrefix.replace(/:+$/, "")}:bull`;
}

/**
 * Defaults of every job: finished jobs leave Redis at once (the delivery history is in
 * PostgreSQL), failed ones stay a week (capped) for the operator to inspect.
 */
export const DEFAULT_JOB_OPTIONS: DefaultJobOptions = {
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
};

/** Opens a queue handle on an existing connection. */
export function openQueue(name: string, connection: Redis, keyPrefix: string): Queue {
  return new Queue(name, { connection, prefix: bullPrefix(keyPrefix), defaultJobOptions: DEFAULT_JOB_OPTIONS });
}
