/**
 * @vw/queues — the BullMQ catalogue (queue names, versioned job names, payload schemas) and the
 * connection policy shared by producers (event-ingest, admin-api) and the delivery worker.
 * Nothing else in the repository writes a queue or job name as a string literal.
 */
export * from "./catalogue.js";
export * from "./connection.js";
export * from "./producer.js";
export * from "./analytics-buffer.js";
export * from "./drain-signals.js";
export * from "./drain-wakes.js";
export * from "./redis-lease.js";
export * from "./delivery-shards.js";
export * from "./key-slots.js";
