/**
 * The webhook event catalogue: event types and subscriptions, the delivery envelope, the payload of
 * every delivered type, the analytics events (names, categories, properties), their JSON Schemas
 * and validators, realistic samples, and the OpenAPI 3.1 document describing the webhooks.
 *
 * Like the rest of @vw/contracts it is data and ajv only: no database, queue or HTTP code.
 */
export * from "./event-types.js";
export * from "./analytics-names.js";
export * from "./analytics.schema.js";
export * from "./payloads.schema.js";
export * from "./envelope.schema.js";
export * from "./validators.js";
export * from "./samples.js";
export * from "./openapi.js";
