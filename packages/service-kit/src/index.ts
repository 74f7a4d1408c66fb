/**
 * Small runtime shared by every service: environment parsing, JSON logging, Prometheus metrics, RFC 9457 problem
 * responses, health routes and graceful shutdown. No business logic lives here.
 */
export * from "./config.js";
export * from "./redis-topology.js";
export * from "./errors.js";
export * from "./http.js";
export * from "./logger.js";
export * from "./metrics.js";
export * from "./process-warnings.js";
export * from "./shutdown.js";
export * from "./bearer-auth.js";
export * from "./coalescer.js";
export * from "./api-key-auth.js";
export * from "./auth-throttle.js";
export * from "./secret-strength.js";
export * from "./json-body.js";
export * from "./node-http-errors.js";
export * from "./request-guard.js";
export * from "./request-log.js";
export * from "./dependency-status.js";
export * from "./openapi-route.js";
export * from "./tracing.js";
