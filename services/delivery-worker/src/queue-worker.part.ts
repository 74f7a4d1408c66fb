/**
 * The part of one of the other queues (notifications, maintenance, recoveries, analytics): its
 * queue handle, for the jobs and schedules this process adds, and its BullMQ worker, when this
 * process runs one. Closing lets the job in flight end (within a bound), then closes the queue.
 */
import type { Queue, Worker } from "bullmq";
import type { Logger } from "@vw/service-kit";
import { closeWithin } from "./bounded-close.js";
import type { Part } from "./part.js";

/** A running queue part. */
export interface QueuePart extends Part {
  queue: Queue;
  /** Null when this process only adds jobs to the queue. */
  worker: Worker | null;
}

/** How long a queue's close may take (see bounded-close.ts). */
const QUEUE_CLOSE_MS = 5000;

/**
 * Wraps a started queue and worker: `jobBoundMs` bounds the wait for a job in flight (past it, the
 * job is left to its lock's expiry: another replica takes it over).
 */
export function queuePart(options: { name: string; queue: Queue; worker: Worker | null; jobBoundMs: number; logger: Logger }): QueuePart {
  const { queue, worker, logger } = options;
  return {
    name: options.name,
    queue,
    worker,
    async close() {
      if (worker) await closeWithin(logger, worker.close(), options.jobBoundMs, `worker ${worker.name}`);
      await closeWithin(logger, queue.close(), QUEUE_CLOSE_MS, `queue ${queue.name}`);
    },
  };
}
