import { randomUUID } from "node:crypto";
import type { RequestHandler, Response } from "express";
import type { Logger } from "./logger.js";
import { requestContext } from "./logger.js";

/** Header carrying the request id, in both directions. */
export const REQUEST_ID_HEADER = "X-Request-Id";

// What a caller's id may look like to be reused: a UUID, ULID, W3C trace id, a load balancer's
// `Root=1-...` and similar fit; anything else (too long, spaces, quotes, control or non-ASCII
// characters) is replaced, so a client cannot forge log lines or smuggle text through the header.
const SANE_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:;=+/@-]{0,127}$/;

/** The caller's `X-Request-Id` when it is sane (see above), else a fresh UUID. */
export function requestIdFor(header: string | string[] | undefined): string {
  return typeof header === "string" && SANE_REQUEST_ID.test(header) ? header : randomUUID();
}

/** What the error middleware leaves for the request line (see {@link noteRequestOutcome}). */
export interface RequestOutcome {
  /** Problem type code of the answer (`not-found`, `invalid-request`, ...). */
  code?: string;
  /** The problem's detail, for 4xx answers. */
  detail?: string;
  /** The id quoted in a 5xx answer. */
  errorId?: string;
  /** The unexpected error behind a 5xx answer (logged with its stack). */
  err?: unknown;
}

const OUTCOME = Symbol("request outcome");
type WithOutcome = Response & { [OUTCOME]?: RequestOutcome };

/**
 * Hands the outcome of an error to the request's one log line. Returns false when no
 * {@link requestLogger} is in front (the caller then logs the error itself).
 */
export function noteRequestOutcome(res: Response, outcome: RequestOutcome): boolean {
  const r = res as WithOutcome;
  if (r[OUTCOME] === undefined) return false;
  r[OUTCOME] = outcome;
  return true;
}

/**
 * One log line per request, when its answer is finished (or the client went away): method, path,
 * status, duration and the request id, plus the problem's code and detail for an error answer and
 * the error with its stack for a 5xx. Level: debug for success, warn for 4xx and for a 503 turned
 * away because a dependency is down, error for any other 5xx.
 * The request id (the caller's `X-Request-Id` when sane, else a new UUID) is sent back as
 * `X-Request-Id` and tags every line logged while the request is answered.
 *
 * With `context: false` the request is not run inside {@link requestContext}, so lines logged below
 * its routes carry no request id. That is for processes whose HTTP routes are operations only
 * (the delivery worker's health and metrics): on Node 20, entering an AsyncLocalStorage once turns
 * on async hooks for every promise the process creates from then on, about a tenth of the worker's
 * CPU per delivery (Node 24 keeps the context without hooks).
 */
export function requestLogger(logger: Logger, options: { context?: boolean } = {}): RequestHandler {
  const withContext = options.context ?? true;
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    const requestId = requestIdFor(req.headers["x-request-id"]);
    res.setHeader(REQUEST_ID_HEADER, requestId);
    (res as WithOutcome)[OUTCOME] = {};
    const ctx = { requestId, done: false };
    let logged = false;
    const line = (aborted: boolean) => {
      if (logged) return;
      logged = true;
      const ms = Math.round((Number(process.hrtime.bigint() - start) / 1e6) * 10) / 10;
      const outcome = (res as WithOutcome)[OUTCOME] ?? {};
      const status = res.statusCode;
      // A 503 for an unavailable dependency is the outage's, logged once by its status line
      // (dependency-status.ts); each request it turns away is a warning, not an error of its own.
      const unavailable = status === 503 && (outcome.code === "dependency-unavailable" || outcome.code === "not-ready");
      const level = aborted ? "info" : status >= 500 && !unavailable ? "error" : status >= 400 ? "warn" : "debug";
      const fields: Record<string, unknown> = { requestId, method: req.method, path: req.path, status, ms };
      if (aborted) fields.aborted = true;
      for (const [k, v] of Object.entries(outcome)) if (v !== undefined) fields[k] = v;
      logger[level](fields, aborted ? "request aborted by the client" : "request");
      ctx.done = true;
    };
    res.once("finish", () => line(false));
    res.once("close", () => line(!res.writableFinished));
    if (withContext) requestContext.run(ctx, next);
    else next();
  };
}
