import type { Logger } from "./logger.js";

/**
 * Routes Node's process warnings (deprecations, experimental features, the AWS SDK's
 * NodeVersionSupportWarning, ...) into the JSON log: one `warn` line each, instead of Node's own
 * multi-line plain text on stderr, which breaks a JSON-lines stream for every log shipper.
 * Node installs its printer as a `warning` listener at start-up; this replaces it. Call it right
 * after the logger exists, before any client is built (the AWS SDK warns when a client is).
 */
export function logProcessWarnings(logger: Logger): void {
  process.removeAllListeners("warning");
  process.on("warning", (warning: Error & { code?: string }) => {
    logger.warn({ warning: { name: warning.name, code: warning.code, message: warning.message } }, `process warning: ${warning.name}`);
  });
}
