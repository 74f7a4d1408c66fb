/**
 * Queue handles for BullMQ, on a connection of `createRedisConnection` (redis-connection.ts: the
 * connection policy of each role, on every Redis topology).
 *
 * Every queue's keys carry one hash tag (`<prefix>:bull:{<tag>}:<queue>:...`), so BullMQ's scripts,
 * which touch several keys of one queue at once, run on Redis Cluster as on a standalone Redis.
 */
import { Queue, type DefaultJobOptions } from "bullmq";
import { queueTelemetryOption } from "@vw/service-kit";
import type { RedisClient } from "./redis-connection.js";

export * from "./redis-connection.js";

/** BullMQ key prefix for a deployment's key prefix (`REDIS_KEY_PREFIX`, default `vw`), without a hash tag. */
export function bullPrefix(keyPrefix: string): string {
  return `${keyPrefix.replace(/:+$/, "")}:bull`;
}

/**
 * BullMQ prefix of one queue: the deployment's, then the queue's hash tag (its name, or a delivery
 * shard's tag: delivery-shards.ts). Workers and queue handles of that queue must use the same one.
 */
export function queuePrefix(keyPrefix: string, tag: string): string {
  return `${bullPrefix(keyPrefix)}:{${tag}}`;
}

/**
 * Defaults of every job: finished jobs leave Redis at once (the delivery history is in
 * PostgreSQL), failed ones stay a week (capped) for the operator to inspect.
 */
export const DEFAULT_JOB_OPTIONS: DefaultJobOptions = {
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
};

/**
 * Opens a queue handle on an existing connection; `tag` is the queue's hash tag (default: its
 * name). With tracing on, a job added carries the trace context of its adder (BullMQ's `telemetry`
 * option), and its worker's span continues that trace.
 */
export function openQueue(name: string, connection: RedisClient, keyPrefix: string, tag: string = name): Queue {
  return new Queue(name, { connection, prefix: queuePrefix(keyPrefix, tag), defaultJobOptions: DEFAULT_JOB_OPTIONS, ...queueTelemetryOption() });
}
