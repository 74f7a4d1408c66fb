import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import express, { type ErrorRequestHandler, type Express, type RequestHandler } from "express";
import type { ProblemCode } from "@vw/contracts";
import { AppError, STATUS_TITLES } from "./errors.js";
import type { Logger } from "./logger.js";
import { dependencyStatus, describeError, isDependencyUnavailable } from "./dependency-status.js";
import { answerNodeHttpErrors } from "./node-http-errors.js";
import { requestTextGuard } from "./request-guard.js";
import { noteRequestOutcome, requestLogger } from "./request-log.js";
import { traceRequests } from "./tracing.js";
import { Counter, Gauge, METRICS_PREFIX, type ServiceMetrics } from "./metrics.js";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** Writes an RFC 9457 problem document. */
export function sendProblem(
  res: express.Response,
  status: number,
  code: ProblemCode,
  detail: string,
  extras: Record<string, unknown> = {},
): void {
  const { headers, ...members } = extras as { headers?: Record<string, string> };
  if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  const body = {
    type: `/problems/${code}`,
    title: STATUS_TITLES[status] ?? "Error",
    status,
    detail,
    instance: res.req?.originalUrl?.split("?")[0],
    ...members,
  };
  res.status(status).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(body));
}

/**
 * The one error middleware: AppError becomes its problem document, body-parser failures become
 * 400/413/415, anything else a 500 with an `errorId`. What happened goes into the request's one
 * log line (see `requestLogger`: the problem code and detail, and for a 5xx the error with its
 * stack); an app without a request logger gets a line from here instead.
 */
export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const log = (level: "info" | "warn" | "error", fields: { code?: string; detail?: string; errorId?: string; err?: unknown }, msg: string) => {
      if (!noteRequestOutcome(res, fields)) logger[level]({ method: req.method, path: req.path, ...fields }, msg);
    };
    if (err instanceof AppError) {
      log(err.status >= 500 ? "error" : "warn", { code: err.code, detail: err.detail }, err.detail);
      sendProblem(res, err.status, err.code, err.detail, err.extras);
      return;
    }
    const e = err as { type?: string; status?: number; statusCode?: number; message?: string; limit?: number };
    const status = e.status ?? e.statusCode;
    if (e.type === "entity.too.large") {
      const detail = `The request body exceeds the limit of ${e.limit ?? "?"} bytes.`;
      log("warn", { code: "payload-too-large", detail }, "body too large");
      sendProblem(res, 413, "payload-too-large", detail, { limit: e.limit });
      return;
    }
    if (e.type === "entity.parse.failed") {
      const detail = `The request body is not valid JSON: ${e.message ?? ""}`.trim();
      log("warn", { code: "malformed-json", detail }, "malformed JSON");
      sendProblem(res, 400, "malformed-json", detail);
      return;
    }
    if (e.type === "charset.unsupported" || e.type === "encoding.unsupported") {
      const detail = e.message ?? "Unsupported content encoding or charset.";
      log("warn", { code: "unsupported-encoding", detail }, detail);
      sendProblem(res, 415, "unsupported-encoding", detail);
      return;
    }
    if (e.type === "request.aborted") {
      log("info", { code: "aborted" }, "client aborted the request");
      return;
    }
    if (typeof status === "number" && status >= 400 && status < 500) {
      const detail = e.message ?? "Bad request.";
      log("warn", { code: "bad-request", detail }, detail);
      sendProblem(res, status, "bad-request", detail);
      return;
    }
    const errorId = randomUUID();
    if (isDependencyUnavailable(err)) {
      // The outage itself is logged once by the dependency's status (see dependency-status.ts);
      // each request it fails gets one short line, not a stack trace.
      log("warn", { code: "dependency-unavailable", errorId, detail: describeError(err).message }, "dependency unavailable");
      sendProblem(res, 503, "dependency-unavailable", "A storage dependency did not answer; retry shortly.", {
        errorId,
        headers: { "Retry-After": "2" },
      });
      return;
    }
    log("error", { code: "internal", errorId, err }, "unexpected error");
    sendProblem(res, 500, "internal", "An unexpected error occurred; quote the errorId when reporting it.", { errorId });
  };
}

/** 404 problem for routes nobody handles. */
export const notFoundHandler: RequestHandler = (req, res) => {
  sendProblem(res, 404, "not-found", `No route for ${req.method} ${req.path}.`);
};

/**
 * A named readiness check: resolves when the dependency answers, rejects otherwise. `dependency`
 * names it in outage log lines (`postgresql`, `redis`; `name` when absent).
 */
export type ReadinessCheck = { name: string; dependency?: string; check: () => Promise<unknown> };

/**
 * `GET /healthz` (process up) and `GET /readyz` (every dependency answers within 2 s). The routes
 * are public, so `/readyz` says only which dependency is down (`{"name": "s3", "ok": false}`):
 * an error's text would name internal addresses and ports. The reason goes to the log instead:
 * with a `logger`, each check's outcome feeds the process's status of that dependency, so an
 * outage that only readiness probes see (nothing else talks to it meanwhile) still gets its one
 * `unreachable` line (with the error's code and message) and its one `reachable again` line.
 * With `metrics`, `vw_readiness_check_up{check}` is 1 or 0 after each probe, and
 * `vw_readiness_check_failures_total{check, reason}` counts failures by error code (`ECONNREFUSED`,
 * `timeout`...), never by message.
 */
export function healthRouter(checks: ReadinessCheck[], logger?: Logger, metrics?: ServiceMetrics): express.Router {
  const router = express.Router();
  const gauges = metrics ? readinessMetrics(metrics) : undefined;
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const results = await Promise.all(
      checks.map(async ({ name, dependency, check }) => {
        const status = logger ? dependencyStatus(logger, dependency ?? name) : undefined;
        try {
          await withTimeout(check(), READINESS_TIMEOUT_MS, `${name} did not answer within ${READINESS_TIMEOUT_MS} ms`, "timeout");
          status?.up();
          gauges?.up.set({ check: name }, 1);
          return { name, ok: true };
        } catch (err) {
          status?.down(err, { check: "readiness" });
          gauges?.up.set({ check: name }, 0);
          gauges?.failures.inc({ check: name, reason: describeError(err).code ?? "error" });
          return { name, ok: false };
        }
      }),
    );
    const ok = results.every((r) => r.ok);
    // Not ready is an answer the probe asked for, about an outage its status line already logged.
    if (!ok) noteRequestOutcome(res, { code: "not-ready", detail: results.filter((r) => !r.ok).map((r) => r.name).join(", ") });
    res.status(ok ? 200 : 503).json({ status: ok ? "ready" : "unavailable", checks: results });
  });
  return router;
}

const READINESS_TIMEOUT_MS = 2000;

function readinessMetrics(metrics: ServiceMetrics): { up: Gauge<"check">; failures: Counter<"check" | "reason"> } {
  return {
    up: new Gauge({ name: `${METRICS_PREFIX}readiness_check_up`, help: "1 when the dependency answered the last /readyz probe, 0 when it did not.", labelNames: ["check"], registers: [metrics.registry] }),
    failures: new Counter({
      name: `${METRICS_PREFIX}readiness_check_failures_total`,
      help: "/readyz probes a dependency failed, by error code (timeout: no answer within 2 s).",
      labelNames: ["check", "reason"],
      registers: [metrics.registry],
    }),
  };
}

/** Rejects with `message` (and `code`, when given) if `p` has not settled within `ms`. */
export function withTimeout<T>(p: Promise<T>, ms: number, message: string, code?: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(code === undefined ? new Error(message) : Object.assign(new Error(message), { code })), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/**
 * Base express app: no `x-powered-by`, no ETag generation (services set their own), and
 * `trust proxy` as `options.trustProxy` says (TRUST_PROXY; none by default, so `req.ip` is the TCP
 * peer and a client cannot choose the address it is throttled by). With a `logger`, its first middlewares are the request log (request id, `X-Request-Id`,
 * one line per request) and the {@link requestTextGuard} (NUL or lone surrogates in the path or
 * query: 400), so they apply to every route. `requestContext: false` keeps the request line and
 * `X-Request-Id` but does not enter the request context (see {@link requestLogger}): for an app of
 * operations routes only (health, metrics) in a process whose real work is not requests.
 */
export function createApp(logger?: Logger, options: { requestContext?: boolean; trustProxy?: number | readonly string[] | false } = {}): Express {
  const app = express();
  app.disable("x-powered-by");
  const trustProxy = options.trustProxy ?? false;
  app.set("trust proxy", Array.isArray(trustProxy) ? [...trustProxy] : trustProxy);
  app.set("etag", false);
  app.set("query parser", "simple");
  // First: the request's span (when tracing is on) encloses everything below, the request log included.
  app.use(traceRequests());
  if (logger) {
    app.use(requestLogger(logger, { context: options.requestContext ?? true }));
    app.use(requestTextGuard);
    if (trustProxy === false) app.use(untrustedProxyWarning(logger));
  }
  return app;
}

/**
 * Logs once, at the first request carrying `X-Forwarded-For`, that TRUST_PROXY is not set: behind
 * a proxy every client then has the proxy's address, so they share one failed-authentication
 * counter and one client's failures lock the others out. Nothing else changes.
 */
function untrustedProxyWarning(logger: Logger): RequestHandler {
  let warned = false;
  return (req, _res, next) => {
    if (!warned && req.headers["x-forwarded-for"] !== undefined) {
      warned = true;
      logger.warn(
        { peer: req.socket.remoteAddress },
        "requests arrive with X-Forwarded-For but TRUST_PROXY is not set: clients are told apart by the proxy's address, so they share one failed-authentication counter; set TRUST_PROXY to the proxies in front",
      );
    }
    next();
  };
}

/** Timeouts of {@link listen}'s server. */
export interface ListenOptions {
  /**
   * Node's requestTimeout: the longest a request (headers and body) may take to arrive; then 408
   * and the connection is closed. Node's default (300 s) unless given: a service taking large
   * uploads sets what its largest body needs.
   */
  requestTimeoutMs?: number;
}

/**
 * Starts listening; resolves with the server once bound. What Node's HTTP parser refuses before
 * express runs (431, 417, malformed requests) is answered with a problem document too, and logged
 * to `logger` when given.
 */
export function listen(app: Express, port: number, host = "0.0.0.0", logger?: Logger, options: ListenOptions = {}): Promise<Server> {
  return new Promise((resolve, reject) => {
    const requestTimeout = options.requestTimeoutMs ?? 300_000;
    // Node checks for requests past their time every `connectionsCheckingInterval`: often enough
    // that a short timeout is kept to within a quarter of itself.
    const server = createServer({ requestTimeout, connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(requestTimeout / 4))) }, app);
    answerNodeHttpErrors(server, logger);
    server.once("listening", () => resolve(server));
    server.once("error", reject);
    server.listen(port, host);
    // Keep-alive longer than typical load balancer idle timeouts, so the LB closes first; the
    // headers of a request are never given longer than the whole request.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = Math.min(66_000, requestTimeout);
  });
}

/**
 * Stops accepting connections, lets in-flight requests finish, and closes keep-alive sockets as
 * they go idle (a socket idle only after `close()` would otherwise hold the server open).
 * After `graceMs`, remaining connections are cut.
 */
export function closeServer(server: Server, graceMs = 8_000): Promise<void> {
  return new Promise((resolve) => {
    const reaper = setInterval(() => server.closeIdleConnections(), 50);
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearInterval(reaper);
      clearTimeout(cut);
      resolve();
    });
    server.closeIdleConnections();
  });
}
