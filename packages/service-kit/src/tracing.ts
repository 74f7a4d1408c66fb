/**
 * OpenTelemetry traces, configured by the standard `OTEL_*` variables and off unless an OTLP
 * endpoint is set. Off, nothing of the SDK is loaded: every helper here checks one variable and
 * runs the work as it is. On, {@link startTracing} loads the SDK (tracing-sdk.ts) and the helpers
 * open spans, put `trace_id`/`span_id` on log lines and carry a trace through BullMQ jobs.
 *
 * Outbound HTTP is never instrumented: a delivery to a customer carries no trace header.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  createTraceState,
  isSpanContextValid,
  propagation,
  trace,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
} from "@opentelemetry/api";
import type { Telemetry } from "bullmq";
import type { RequestHandler } from "express";
import type { TracingConfig } from "./config.js";
import type { Logger } from "./logger.js";
import { currentRuntime, setRuntime, type TracingRuntime } from "./tracing-runtime.js";

export { OTLP_PROTOCOLS, TRACE_SAMPLERS, readTracing, type OtlpProtocol, type TraceSamplerName, type TracingConfig } from "./config.js";
export { traceLogFields, type TracingRuntime } from "./tracing-runtime.js";


/** A started (or disabled) tracing set-up: `shutdown` flushes the last spans. */
export interface Tracing {
  readonly enabled: boolean;
  shutdown(): Promise<void>;
}

/**
 * Starts tracing when `config.endpoint` is set: loads the SDK, registers the W3C propagator, the
 * PostgreSQL and Redis instrumentations and the exporter. Call it from `main.ts` right after the
 * logger, before any client sends a query. Off, it loads nothing and returns at once.
 */
export async function startTracing(config: TracingConfig, service: string, logger: Logger): Promise<Tracing> {
  if (config.endpoint === null) return { enabled: false, shutdown: async () => undefined };
  const sdk = await import("./tracing-sdk.js");
  setRuntime(sdk.startSdk({ ...config, endpoint: config.endpoint, serviceName: config.serviceName ?? service }, logger));
  logger.info({ endpoint: config.endpoint, protocol: config.protocol, sampler: config.sampler, samplerRatio: config.samplerRatio }, "tracing: exporting spans over OTLP");
  const started = currentRuntime() as TracingRuntime;
  return {
    enabled: true,
    shutdown: async () => {
      if (currentRuntime() === started) setRuntime(null);
      await started.shutdown();
    },
  };
}

/** Whether spans are being recorded in this process. */
export function tracingEnabled(): boolean {
  return currentRuntime() !== null;
}

/** What a traced piece of work may add to its span. */
export interface SpanNotes {
  setAttributes(attributes: Attributes): void;
}

const NO_NOTES: SpanNotes = { setAttributes: () => undefined };

/**
 * Runs `work` inside a new span named `name` (child of the active one), which ends when the work
 * settles and records a thrown error. With tracing off, runs `work` as it is.
 */
export function withSpan<T>(name: string, attributes: Attributes, work: (span: SpanNotes) => Promise<T>, kind: SpanKind = SpanKind.INTERNAL): Promise<T> {
  const rt = currentRuntime();
  if (rt === null) return work(NO_NOTES);
  return rt.tracer.startActiveSpan(name, { kind, attributes }, async (span: Span) => {
    try {
      return await work(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Adds attributes to the active span, if any (tracing on). */
export function noteOnSpan(attributes: Attributes): void {
  if (currentRuntime() === null) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/**
 * The active trace context as BullMQ's telemetry metadata, to hand to a job added later from
 * another context (a batch of several requests' jobs): each job then continues its own request's
 * trace. Undefined with tracing off.
 */
export function traceMetadata(): string | undefined {
  const rt = currentRuntime();
  if (rt === null) return undefined;
  return rt.bullmq.contextManager.getMetadata(context.active());
}

/**
 * BullMQ's `telemetry` option while tracing is on, else nothing: spread it into Queue options, so
 * that a job added carries its adder's trace context. Not into a Worker's: {@link withJobSpan} opens
 * the job's span instead, around the processor only.
 */
export function queueTelemetryOption(): { telemetry?: Telemetry } {
  const rt = currentRuntime();
  return rt === null ? {} : { telemetry: rt.bullmq };
}

/** What {@link withJobSpan} reads of a BullMQ job. */
export interface TracedJob {
  readonly id?: string | undefined;
  readonly name: string;
  readonly queueName: string;
  readonly attemptsStarted: number;
  readonly opts: { telemetry?: { metadata?: string | undefined } | undefined };
}

/**
 * Runs a worker's processor for `job` inside the job's span, `process <queue>` (kind CONSUMER),
 * child of the trace context the job carries (BullMQ's telemetry metadata, written by the adder's
 * Queue or by {@link traceMetadata}); a job without one starts a trace. The span covers the
 * processor only: BullMQ's own work around it (fetching, lock renewals, marking the job done)
 * runs under no span, so the pg and ioredis instrumentations leave its calls at their first
 * check. A `DelayedError` (a retry or a park) is how a run ends normally, not a failure.
 * With tracing off, runs `work` as it is.
 */
export function withJobSpan<T>(job: TracedJob, work: () => Promise<T>): Promise<T> {
  const rt = currentRuntime();
  if (rt === null) return work();
  const parent = jobParent(job.opts.telemetry?.metadata);
  const attributes: Attributes = { "bullmq.queue.name": job.queueName, "bullmq.job.name": job.name, "bullmq.job.attempts.started": job.attemptsStarted };
  if (job.id !== undefined) attributes["bullmq.job.id"] = job.id;
  const span = rt.tracer.startSpan(`process ${job.queueName}`, { kind: SpanKind.CONSUMER, attributes }, parent);
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await work();
    } catch (err) {
      if (!(err instanceof Error && NOT_FAILURES.has(err.name))) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      }
      throw err;
    } finally {
      span.end();
    }
  });
}

/** What a processor throws to tell BullMQ where the job goes next, not that it failed. */
const NOT_FAILURES = new Set(["DelayedError", "WaitingChildrenError", "WaitingError", "RateLimitError"]);

/** W3C `traceparent`, version 00: trace id, parent span id, flags. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * The context a job's metadata carries (bullmq-otel's: the W3C headers as JSON), read here rather
 * than through the propagation API (whose composite propagator also parses baggage the platform
 * never sets); the root context if none or unreadable.
 */
function jobParent(metadata: string | undefined): Context {
  if (metadata === undefined || metadata === "") return ROOT_CONTEXT;
  // The jobs of one intake request carry the same metadata: read once, while it keeps coming.
  return cached(parents, metadata, readJobParent);
}

/** The contexts of the job metadata read last (contexts are immutable: shared safely). */
const parents = new Map<string, Context>();

/** The server a URL names, as an attempt span records it; cached, as a worker sends to few endpoints. */
function serverOf(url: string): { host: string; port: number; scheme: string } {
  return cached(servers, url, () => {
    try {
      const u = new URL(url);
      const scheme = u.protocol.replace(/:$/, "");
      return { host: u.hostname, port: u.port === "" ? (scheme === "https" ? 443 : 80) : Number(u.port), scheme };
    } catch {
      // An endpoint URL is validated when stored; a span without its host is still a span.
      return { host: "", port: 0, scheme: "" };
    }
  });
}

const servers = new Map<string, { host: string; port: number; scheme: string }>();

/** Most entries each of these caches keeps; the oldest goes first. */
const CACHE_ENTRIES = 256;

/** `cache`'s value for `key`, made by `make` (and kept) the first time. */
function cached<V>(cache: Map<string, V>, key: string, make: (key: string) => V): V {
  const known = cache.get(key);
  if (known !== undefined) return known;
  const value = make(key);
  if (cache.size >= CACHE_ENTRIES) cache.delete(cache.keys().next().value as string);
  cache.set(key, value);
  return value;
}

/** What {@link jobParent} reads, uncached. */
function readJobParent(metadata: string): Context {
  let carrier: unknown;
  try {
    carrier = JSON.parse(metadata);
  } catch {
    return ROOT_CONTEXT;
  }
  if (typeof carrier !== "object" || carrier === null) return ROOT_CONTEXT;
  const { traceparent, tracestate } = carrier as { traceparent?: unknown; tracestate?: unknown };
  const parts = typeof traceparent === "string" ? TRACEPARENT.exec(traceparent) : null;
  if (parts === null) return ROOT_CONTEXT;
  const parent: SpanContext = { traceId: parts[1] as string, spanId: parts[2] as string, traceFlags: parseInt(parts[3] as string, 16) & 1, isRemote: true };
  if (!isSpanContextValid(parent)) return ROOT_CONTEXT;
  if (typeof tracestate === "string" && tracestate !== "") parent.traceState = createTraceState(tracestate);
  return trace.setSpanContext(ROOT_CONTEXT, parent);
}

/**
 * One server span per request, continuing the caller's W3C `traceparent` when it sends one; named
 * `METHOD route` once the route is known. A no-op while tracing is off.
 */
export function traceRequests(): RequestHandler {
  return (req, res, next) => {
    const rt = currentRuntime();
    if (rt === null) return next();
    const parent = propagation.extract(context.active(), req.headers);
    const span = rt.tracer.startSpan(
      req.method,
      { kind: SpanKind.SERVER, attributes: { "http.request.method": req.method, "url.path": req.path, "url.scheme": req.protocol } },
      parent,
    );
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      const route = (req.route as { path?: unknown } | undefined)?.path;
      if (typeof route === "string") {
        const template = `${req.baseUrl}${route}`;
        span.setAttribute("http.route", template);
        span.updateName(`${req.method} ${template}`);
      }
      span.setAttribute("http.response.status_code", res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    };
    res.once("finish", end);
    res.once("close", end);
    context.with(trace.setSpan(parent, span), next);
  };
}

export { SpanKind };

/** What {@link traceAttempt} reads from an attempt's result (webhook-core's `AttemptRecord`). */
export interface TracedAttemptResult {
  verdict: string;
  durationMs: number;
  responseStatus: number | null;
  errorKind: string | null;
}

/**
 * One span per webhook attempt (`webhook attempt`, kind CLIENT): the receiver's host and port,
 * the HTTP status, the duration and the verdict (`delivered`, `retry`, `gone`, `rejected`), with
 * the delivery's and endpoint's ids. Never the URL's path or query (they may hold the customer's
 * tokens). The request itself carries no trace header: nothing injects one into webhook POSTs.
 * A child of the active span (Test, the auth hook); a drain's attempts use {@link traceDeliveryAttempt}.
 */
export function traceAttempt<T extends TracedAttemptResult>(url: string, ids: AttemptIds, send: () => Promise<T>): Promise<T> {
  const rt = currentRuntime();
  if (rt === null) return send();
  return rt.tracer.startActiveSpan("webhook attempt", { kind: SpanKind.CLIENT, attributes: attemptAttributes(url, ids) }, (span: Span) => runAttempt(span, send));
}

/** What an attempt span names besides its server: the delivery, its endpoint, why it is sent and which attempt it is. */
export interface AttemptIds {
  deliveryId: string;
  endpointId: string;
  trigger?: string;
  /** The delivery's attempt number (1 for the first), when known. */
  attemptNumber?: number;
}

/**
 * A drain's attempt of one delivery: its `webhook attempt` span (as {@link traceAttempt}) is the
 * child of the trace context the delivery carries (`metadata`: what {@link traceMetadata} gave its
 * intake, stored with the delivery), or starts a trace when it carries none. `after` (what the
 * answer leads to: its log write, a disable, a retry's timer) runs in that span's context once the
 * span has ended, so the log lines it writes carry the attempt's trace and span ids. One span per
 * attempt: a drain sends many deliveries of many traces, and no BullMQ job stands for one
 * delivery, so no consumer span wraps it. With tracing off, runs `send` then `after` as they are.
 */
export async function traceDeliveryAttempt<T extends TracedAttemptResult, R>(
  url: string,
  ids: AttemptIds,
  metadata: string | undefined,
  send: () => Promise<T>,
  after: (result: T) => Promise<R>,
): Promise<R> {
  const rt = currentRuntime();
  if (rt === null) return after(await send());
  const parent = jobParent(metadata);
  const span = rt.tracer.startSpan("webhook attempt", { kind: SpanKind.CLIENT, attributes: attemptAttributes(url, ids) }, parent);
  const inSpan = trace.setSpan(parent, span);
  const result = await context.with(inSpan, () => runAttempt(span, send));
  return context.with(inSpan, () => after(result));
}

function attemptAttributes(url: string, ids: AttemptIds): Attributes {
  const { host, port, scheme } = serverOf(url);
  const attributes: Attributes = {
    "http.request.method": "POST",
    "server.address": host,
    "server.port": port,
    "url.scheme": scheme,
    "webhook.delivery_id": ids.deliveryId,
    "webhook.endpoint_id": ids.endpointId,
  };
  if (ids.trigger !== undefined) attributes["webhook.trigger"] = ids.trigger;
  if (ids.attemptNumber !== undefined) attributes["webhook.attempt_number"] = ids.attemptNumber;
  return attributes;
}

/** Runs `send` in `span`, records its outcome on it and ends it. */
async function runAttempt<T extends TracedAttemptResult>(span: Span, send: () => Promise<T>): Promise<T> {
  try {
    const sent = await send();
    span.setAttributes({ "webhook.verdict": sent.verdict, "webhook.duration_ms": sent.durationMs });
    if (sent.responseStatus !== null) span.setAttribute("http.response.status_code", sent.responseStatus);
    if (sent.errorKind !== null) span.setAttribute("error.type", sent.errorKind);
    if (sent.verdict !== "delivered") span.setStatus({ code: SpanStatusCode.ERROR, message: sent.verdict });
    return sent;
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}
