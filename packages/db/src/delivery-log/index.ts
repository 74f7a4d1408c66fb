/** The delivery log: its one writer, its reads, its partitions (see delivery-log.ts). */
export { DeliveryLog, newDeliveryId, newEventRowId, deliveryCreatedAt, failureCounterChanges, type StoredIntake } from "./delivery-log.js";
export {
  DeliveryHistory,
  percentile,
  STATS_WINDOW_MS,
  type DeliveryDetail,
  type DeliveryFilter,
  type DeliverySummary,
  type EndpointStatsSummary,
} from "./delivery-history.js";
export { LogPartitions, LOG_TABLES, utcDay, type DroppedPartition } from "./log-partitions.js";
export { pgRunner, prismaRunner, type SqlRunner, type Statement } from "./sql-runner.js";
export { uuidV7, uuidV7Time } from "./uuid-v7.js";
export type * from "./log-types.js";
