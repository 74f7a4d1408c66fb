/** The OpenAPI 3.1 documents of the HTTP services, and the builders they share. */
export * from "./document-kit.js";
export { ALWAYS_PROBLEMS } from "./service-routes.js";
export * from "./admin-api.openapi.js";
export * from "./event-ingest.openapi.js";
export * from "./map-storage.openapi.js";
