import { AsyncLocalStorage } from "node:async_hooks";
import { pino, type Logger } from "pino";
import pinoPretty from "pino-pretty";
import type { LogFormat } from "./config.js";
import { traceLogFields } from "./tracing-runtime.js";

export type { Logger };

/** What every log line written while a request is being answered carries. */
export interface RequestContext {
  /** The request's id, also sent back as `X-Request-Id`. */
  readonly requestId: string;
  /**
   * Set once the answer is finished: work the request started that outlives it (a group commit
   * another request joined, a timer) must not keep tagging its lines with that id.
   */
  done: boolean;
}

/**
 * The request being answered on the current async path (set by `requestLogger`). The logger reads
 * it, so a line logged anywhere below a route (a service, a repository) carries the request id
 * without the logger being passed down per request.
 */
export const requestContext = new AsyncLocalStorage<RequestContext>();

/** The id of the request being answered on this async path, if any. */
export function currentRequestId(): string | undefined {
  const ctx = requestContext.getStore();
  return ctx && !ctx.done ? ctx.requestId : undefined;
}

/**
 * The service logger: JSON lines by default (`format` `json`), or coloured single lines for a
 * terminal (`pretty`, LOG_FORMAT=pretty, for development). Every line logged while a request is
 * answered carries its `requestId`, and every line logged inside a span its `trace_id` and `span_id`. Header and secret-bearing fields are redacted so a token never
 * reaches the logs, whatever a caller passes in. Lines go to stdout unless `destination` is given.
 */
export function createLogger(service: string, level: string, format: LogFormat = "json", destination: NodeJS.WritableStream = process.stdout): Logger {
  const options = {
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: () => {
      const requestId = currentRequestId();
      // trace_id and span_id of the active span when tracing is on (tracing.ts), else nothing.
      const ids = traceLogFields();
      return requestId === undefined ? ids : { requestId, ...ids };
    },
    redact: {
      paths: [
        "authorization",
        "*.authorization",
        "headers.authorization",
        "req.headers.authorization",
        "token",
        "*.token",
        "secret",
        "*.secret",
        "password",
        "*.password",
      ],
      censor: "[redacted]",
    },
  };
  if (format === "json") return pino(options, destination);
  // In-process and synchronous (no transport worker thread): a line is on the terminal before the
  // next one, and nothing is lost when the process exits right after logging.
  const pretty = pinoPretty({
    colorize: true,
    sync: true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname,service",
    messageFormat: "{service} {msg}",
    singleLine: true,
    destination,
  });
  return pino(options, pretty);
}
