/**
 * @vw/testing — test and benchmark helpers (devDependency only): a customer-like webhook receiver
 * that verifies with the `standardwebhooks` library, and an SMTP sink (plain-text mails; the
 * subject and the text part are read without a MIME library, which is enough for our own mails),
 * service processes, and per-run Redis key prefixes.
 */
export * from "./receiver.js";
export * from "./smtp-sink.js";
export * from "./processes.js";
export * from "./redis-keys.js";
export * from "./routes.js";
export * from "./fuzz.js";
export * from "./tcp-proxy.js";
