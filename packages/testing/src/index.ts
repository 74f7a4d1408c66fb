/**
 * @vw/testing — test and benchmark helpers (devDependency only): a customer-like webhook receiver
 * that verifies with the `standardwebhooks` library, an SMTP sink (plain-text mails; the
 * subject and the text part are read without a MIME library, which is enough for our own mails),
 * service processes, per-run Redis key prefixes (and their clean-up on a Redis or on every primary
 * of a Cluster), the routes an express app registers, the OpenAPI conformance recorder of the
 * integration suites, and private stores for fault tests and
 * benchmarks (and an OTLP/HTTP trace receiver): a `redis-server`, a PostgreSQL 15, a Redis Cluster and a Sentinel group of their own
 * on free loopback ports, every process of which is stopped by pid (also when a test fails).
 */
export * from "./receiver.js";
export * from "./smtp-sink.js";
export * from "./processes.js";
export * from "./prometheus.js";
export * from "./redis-keys.js";
export * from "./redis-client.js";
export * from "./registered-routes.js";
export * from "./openapi-conformance.js";
export * from "./fuzz.js";
export * from "./tcp-proxy.js";
export * from "./test-database.js";
export * from "./eventually.js";
export * from "./credential-burst.js";
export * from "./process-memory.js";
export * from "./resp-command.js";
export * from "./redis-server.js";
export * from "./postgres-server.js";
export * from "./pg-connections.js";
export * from "./redis-cluster.js";
export * from "./redis-sentinel.js";
export { isAlive } from "./owned-processes.js";
export * from "./otlp-receiver.js";
export * from "./forward-proxy.js";
export * from "./tls-certificate.js";
export * from "./test-topologies.js";
export * from "./pgbouncer.js";
