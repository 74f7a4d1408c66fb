/**
 * Small runtime shared by every service: environment parsing, JSON logging, RFC 9457 problem
 * responses, health routes and graceful shutdown. No business logic lives here.
 */
export * from "./config.js";
export * from "./errors.js";
export * from "./http.js";
export * from "./logger.js";
export * from "./shutdown.js";
export * from "./bearer-auth.js";
export * from "./openapi-route.js";
