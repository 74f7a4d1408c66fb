/**
 * Prometheus metrics of a process, with prom-client: one registry per process holding Node's
 * default process and event-loop metrics, the HTTP request-duration histogram, and whatever the
 * service adds (`registry` is where every other metric of the service registers). Served by
 * {@link metricsRouter} at `GET /metrics` on the service's PORT, unauthenticated like `/healthz`.
 *
 * Labels are bounded on purpose: a route TEMPLATE (never the path a client sent), the method from
 * a fixed list, the status code. No label ever carries an organization, world or endpoint: their
 * number is unbounded, and a Prometheus series per tenant is what takes a monitoring stack down.
 */
import express, { type Request, type RequestHandler, type Response } from "express";
import { Histogram, Registry, collectDefaultMetrics } from "prom-client";

export { Counter, Gauge, Histogram, Registry } from "prom-client";

/** Prefix of every metric this project defines (Node's default metrics keep their usual names). */
export const METRICS_PREFIX = "vw_";

/** Route label of a request that no route matched (a 404, a probe of a random path). */
export const UNMATCHED_ROUTE = "unmatched";

/** Upper bounds (seconds) of the HTTP request-duration histogram: 1 ms to 30 s. */
export const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
const ROUTE_TEMPLATE = Symbol("vw.routeTemplate");

/** The metrics of one process. */
export interface ServiceMetrics {
  /** Name of the service (`map-storage`, ...), for logs and documentation. */
  readonly service: string;
  /** The process's registry: `/metrics` serves it; services register their own metrics on it. */
  readonly registry: Registry;
  /** `vw_http_request_duration_seconds{route,method,status}`. */
  readonly httpDuration: Histogram<"route" | "method" | "status">;
}

/**
 * Creates the registry of a process with Node's default metrics (CPU, memory, heap, GC, event-loop
 * lag, handles) and the HTTP histogram. `main.ts` creates one; an app built without one (tests)
 * gets its own, so two apps in one process never share series.
 */
export function createServiceMetrics(service: string): ServiceMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const httpDuration = new Histogram({
    name: `${METRICS_PREFIX}http_request_duration_seconds`,
    help: "HTTP requests by route template, method and status code, from arrival to the last byte sent (or the client leaving: status aborted).",
    labelNames: ["route", "method", "status"] as const,
    buckets: HTTP_DURATION_BUCKETS,
    registers: [registry],
  });
  return { service, registry, httpDuration };
}

/**
 * Names the route of a request handled outside an express route (a catch-all handler such as
 * map-storage's files): the label `route` of its HTTP metrics. Use express path syntax.
 */
export function setRouteTemplate(res: Response, template: string): void {
  (res.locals as Record<symbol, unknown>)[ROUTE_TEMPLATE] = template;
}

/**
 * Times every request into `metrics.httpDuration`. Mount it first. The route label is the
 * matched route's path joined to the mount path of its router, taken at the moment express
 * matches the route (after an error the router has already restored `req.baseUrl`), so routers
 * must be mounted on fixed paths: parameters belong in route paths, or they would become labels.
 */
export function httpMetrics(metrics: ServiceMetrics): RequestHandler {
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    captureRouteTemplate(req, res);
    res.once("close", () => {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      const route = (res.locals as Record<symbol, unknown>)[ROUTE_TEMPLATE];
      metrics.httpDuration.observe(
        {
          route: typeof route === "string" ? route : UNMATCHED_ROUTE,
          method: KNOWN_METHODS.has(req.method) ? req.method : "other",
          status: res.writableFinished ? String(res.statusCode) : "aborted",
        },
        seconds,
      );
    });
    next();
  };
}

/** Records `baseUrl + route.path` whenever express assigns `req.route` (it does so on each route match). */
function captureRouteTemplate(req: Request, res: Response): void {
  let current: unknown = undefined;
  Object.defineProperty(req, "route", {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (route: unknown) => {
      current = route;
      const path = (route as { path?: unknown } | undefined)?.path;
      if (typeof path === "string") setRouteTemplate(res, `${req.baseUrl}${path}` || "/");
    },
  });
}

/**
 * `GET /metrics`: the registry in the Prometheus text format. Collectors that read Redis or the
 * database run at scrape time; if one fails, the scrape fails (503 through the error middleware)
 * rather than serving a partial page Prometheus would take for the truth.
 */
export function metricsRouter(metrics: ServiceMetrics): express.Router {
  const router = express.Router();
  router.get("/metrics", async (_req, res, next) => {
    try {
      const text = await metrics.registry.metrics();
      res.setHeader("Cache-Control", "no-store");
      res.type(metrics.registry.contentType).send(text);
    } catch (err) {
      next(err);
    }
  });
  return router;
}
