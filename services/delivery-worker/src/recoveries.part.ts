/**
 * The recoveries part: the recoveries queue and its worker, which queues an endpoint's failed
 * deliveries again and wakes the endpoint (recoveries.worker.ts, recover.ts).
 */
import { QUEUE_NAMES, openQueue, type RedisClient } from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import { queuePart, type QueuePart } from "./queue-worker.part.js";
import type { RecoverDeps } from "./recover.js";
import { createRecoveriesWorker } from "./recoveries.worker.js";

/** Starts the recoveries part. */
export function startRecoveries(options: {
  connection: RedisClient;
  keyPrefix: string;
  deps: RecoverDeps;
  logger: Logger;
  /** Bound of the wait for a recovery in flight at close (it resumes from its cursor elsewhere). */
  jobBoundMs: number;
}): QueuePart {
  const { logger } = options;
  const queue = openQueue(QUEUE_NAMES.recoveries, options.connection, options.keyPrefix);
  queue.on("error", redisClientErrorListener(logger, "queue error"));
  const worker = createRecoveriesWorker({ connection: options.connection, keyPrefix: options.keyPrefix, deps: options.deps });
  return queuePart({ name: "recoveries", queue, worker, jobBoundMs: options.jobBoundMs, logger });
}
