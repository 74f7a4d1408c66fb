/**
 * @vw/testing — test and benchmark helpers (devDependency only): a customer-like webhook receiver
 * that verifies with the `standardwebhooks` library, an SMTP sink (plain-text mails; the
 * subject and the text part are read without a MIME library, which is enough for our own mails),
 * service processes, per-run Redis key prefixes, the routes an express app registers, and the
 * OpenAPI conformance recorder of the integration suites.
 */
export * from "./receiver.js";
export * from "./smtp-sink.js";
export * from "./processes.js";
export * from "./prometheus.js";
export * from "./redis-keys.js";
export * from "./registered-routes.js";
export * from "./openapi-conformance.js";
export * from "./fuzz.js";
export * from "./tcp-proxy.js";
export * from "./test-database.js";
export * from "./eventually.js";
