/** The BullMQ worker of the notifications queue: endpoint-disabled mails, retried on SMTP failures. */
import { UnrecoverableError, Worker } from "bullmq";
import type { RedisClient } from "@vw/queues";
import {
  JOB_NAMES,
  QUEUE_NAMES,
  queuePrefix,
  validateEndpointDisabledMail,
  INFRA_BACKOFF_SETTINGS,
  WORKER_RUN_RETRY_DELAY_MS,
  jobPayload,
} from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import type { EndpointDisabledMailer } from "./mailer.js";
import type { WorkerMetrics } from "./metrics.js";

/** Starts the notifications worker. */
export function createNotificationsWorker(options: {
  connection: RedisClient;
  keyPrefix: string;
  mailer: EndpointDisabledMailer;
  metrics: WorkerMetrics;
  logger: Logger;
  /** The queue's BullMQ prefix; `queuePrefix` of the queue's name unless given. */
  prefix?: string;
}): Worker {
  const worker = new Worker(
    QUEUE_NAMES.notifications,
    async (job) => {
      if (job.name !== JOB_NAMES.endpointDisabledMail) throw new UnrecoverableError(`unknown job name ${job.name}`);
      const to = await options.mailer.send(jobPayload(JOB_NAMES.endpointDisabledMail, validateEndpointDisabledMail, job.data));
      if (to.length > 0) options.metrics.mailsSent.inc();
      return { to };
    },
    {
      connection: options.connection,
      prefix: options.prefix ?? queuePrefix(options.keyPrefix, QUEUE_NAMES.notifications),
      concurrency: 4,
      settings: INFRA_BACKOFF_SETTINGS,
      runRetryDelay: WORKER_RUN_RETRY_DELAY_MS,
    },
  );
  worker.on("failed", (job, err: Error) => options.logger.error({ jobId: job?.id, attemptsMade: job?.attemptsMade, err }, "notification job failed"));
  worker.on("error", redisClientErrorListener(options.logger, "notifications worker error"));
  return worker;
}
