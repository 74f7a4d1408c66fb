/**
 * The shard layout of the deliveries queue (QUEUE_SHARDS: one BullMQ queue per shard, see
 * delivery-shards.ts of @vw/queues) and the drain signals that wake endpoints in it. Every part
 * that makes work due wakes through it (the drains' retries, the recoveries, the analytics flush,
 * the reconciler), so it is started first and closed last of them.
 */
import { DrainSignals, openDeliveryQueues, type DeliveryQueues, type RedisClient } from "@vw/queues";
import { redisClientErrorListener, type Logger } from "@vw/service-kit";
import { closeWithin } from "./bounded-close.js";
import type { Part } from "./part.js";

/** How long closing one shard's queue may take (see bounded-close.ts). */
const QUEUE_CLOSE_MS = 10_000;

/** The running shard layout. */
export interface ShardsPart extends Part {
  queues: DeliveryQueues;
  signals: DrainSignals;
}

/** Opens the shards' queues (this process serves them all). */
export function startShards(options: { connection: RedisClient; keyPrefix: string; queueShards: number; logger: Logger }): ShardsPart {
  const { logger } = options;
  const queues = openDeliveryQueues(options.connection, options.keyPrefix, options.queueShards);
  // BullMQ prints an unlistened queue error to stderr, once per reconnect attempt during an outage.
  queues.on("error", redisClientErrorListener(logger, "queue error"));
  return {
    name: "delivery shards",
    queues,
    signals: new DrainSignals(queues),
    async close() {
      await Promise.all(queues.shards.map((q) => closeWithin(logger, q.close(), QUEUE_CLOSE_MS, `queue ${q.name}`)));
    },
  };
}
