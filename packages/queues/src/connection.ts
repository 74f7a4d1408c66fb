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

/** A Redis connection for BullMQ with the retry policy of its role. */
export function createRedisConnection(redisUrl: string, role: RedisRole): Redis {
  return role === "worker"
    ? new Redis(redisUrl, { maxRetriesPerRequest: null, enableReadyCheck: true })
    : new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 5000 });
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
