/**
 * Queue handles for BullMQ, on a connection of `createRedisConnection` (redis-connection.ts: the
 * connection policy of each role, on every Redis topology).
 */
import { Queue, type DefaultJobOptions } from "bullmq";
import { queueTelemetryOption } from "@vw/service-kit";
import type { RedisClient } from "./redis-connection.js";

export * from "./redis-connection.js";

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

/**
 * Opens a queue handle on an existing connection. With tracing on, a job added carries the trace
 * context of its adder (BullMQ's `telemetry` option), and its worker's span continues that trace.
 */
export function openQueue(name: string, connection: RedisClient, keyPrefix: string): Queue {
  return new Queue(name, { connection, prefix: bullPrefix(keyPrefix), defaultJobOptions: DEFAULT_JOB_OPTIONS, ...queueTelemetryOption() });
}
