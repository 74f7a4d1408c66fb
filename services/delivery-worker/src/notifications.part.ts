/**
 * The mail part: the notifications queue (the drains add an endpoint-disabled mail to it) and its
 * worker, which sends the mails (mailer.ts, notifications.worker.ts).
 */
import { QUEUE_NAMES, openQueue, type RedisClient } from "@vw/queues";
import type { SqlRunner } from "@vw/db";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import { EndpointDisabledMailer, type MailTransport } from "./mailer.js";
import type { WorkerMetrics } from "./metrics.js";
import { createNotificationsWorker } from "./notifications.worker.js";
import { queuePart, type QueuePart } from "./queue-worker.part.js";

/** Starts the mail part. */
export function startNotifications(options: {
  connection: RedisClient;
  keyPrefix: string;
  sql: SqlRunner;
  mailTransport: MailTransport | null;
  mailFrom: string;
  metrics: WorkerMetrics;
  logger: Logger;
  /** Bound of the wait for a mail in flight at close. */
  jobBoundMs: number;
}): QueuePart {
  const { logger } = options;
  const queue = openQueue(QUEUE_NAMES.notifications, options.connection, options.keyPrefix);
  queue.on("error", redisClientErrorListener(logger, "queue error"));
  const mailer = new EndpointDisabledMailer(options.sql, options.mailTransport, options.mailFrom, logger);
  const worker = createNotificationsWorker({ connection: options.connection, keyPrefix: options.keyPrefix, mailer, metrics: options.metrics, logger });
  return queuePart({ name: "mail", queue, worker, jobBoundMs: options.jobBoundMs, logger });
}
