/**
 * The OpenTelemetry SDK set-up, imported by `startTracing` only when an endpoint is configured:
 * a process with tracing off never loads this module nor anything it imports.
 */
import { createRequire } from "node:module";
import { diag, trace, DiagLogLevel, type Attributes, type Context, type Link, type SpanKind } from "@opentelemetry/api";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { IORedisInstrumentation } from "@opentelemetry/instrumentation-ioredis";
import { PgInstrumentation } from "@opentelemetry/instrumentation-pg";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SamplingResult,
} from "@opentelemetry/sdk-trace-node";
import { BullMQOtel } from "bullmq-otel";
import type { Logger } from "./logger.js";
import type { TraceSamplerName, TracingConfig } from "./config.js";
import type { TracingRuntime } from "./tracing-runtime.js";

/** Name of this platform's tracer (its own spans: HTTP requests, intake, attempts, Test, Replay...). */
export const TRACER_NAME = "vw";

/** The sampler OTEL_TRACES_SAMPLER names. */
export function samplerOf(name: TraceSamplerName, ratio: number): Sampler {
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/**
 * BullMQ's own housekeeping (a worker polling for its next job, the stalled-job check, pauses)
 * opens a root span each time: a trace per poll that says nothing about any event. Those roots,
 * and so their Redis children, are not recorded; every other decision is the configured sampler's.
 */
const BULLMQ_HOUSEKEEPING = /^(getNextJob|startStalledCheckTimer|moveStalledJobsToWait|rateLimit|pause|resume|close|trimEvents|promoteJobs) /;

class QuietHousekeepingSampler implements Sampler {
  constructor(private readonly inner: Sampler) {}

  shouldSample(ctx: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    if (trace.getSpanContext(ctx) === undefined && BULLMQ_HOUSEKEEPING.test(name)) return { decision: SamplingDecision.NOT_RECORD };
    return this.inner.shouldSample(ctx, traceId, name, kind, attributes, links);
  }

  toString(): string {
    return `QuietHousekeeping{${this.inner.toString()}}`;
  }
}

/**
 * Starts the provider (W3C trace context propagation, AsyncLocalStorage context), the OTLP/HTTP
 * exporter of `config.protocol`, and the pg and ioredis instrumentations. Those patch the client
 * classes: the modules are required again through the instrumentations' hooks so that copies
 * loaded before this call (ES module imports run first) are patched too.
 */
export function startSdk(config: TracingConfig & { endpoint: string; serviceName: string }, logger: Logger): TracingRuntime {
  diag.setLogger(rateLimitedDiag(logger), DiagLogLevel.ERROR);
  const exporter = config.protocol === "http/json" ? new JsonTraceExporter({ url: config.endpoint }) : new ProtoTraceExporter({ url: config.endpoint });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": config.serviceName }),
    sampler: new QuietHousekeepingSampler(samplerOf(config.sampler, config.samplerRatio)),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  provider.register();
  // Only spans under one of ours: a query of a timer (the reconciler's sweep) starts no trace.
  const instrumentations = [new PgInstrumentation({ requireParentSpan: true }), new IORedisInstrumentation({ requireParentSpan: true })];
  const require = createRequire(import.meta.url);
  const pgRequire = createRequire(require.resolve("pg"));
  for (const id of ["pg", "ioredis"]) require(id);
  pgRequire("pg-pool");
  return {
    tracer: provider.getTracer(TRACER_NAME),
    bullmq: new BullMQOtel({ tracerName: "bullmq" }),
    shutdown: async () => {
      for (const i of instrumentations) i.disable();
      await provider.shutdown();
    },
  };
}

/** OpenTelemetry's own errors (an export that failed) as log lines, at most one a minute. */
function rateLimitedDiag(logger: Logger) {
  let last = 0;
  const error = (message: string, ...args: unknown[]) => {
    const now = Date.now();
    if (now - last < 60_000) return;
    last = now;
    logger.warn({ detail: args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ") }, `tracing: ${message}`);
  };
  const ignore = () => undefined;
  return { error, warn: ignore, info: ignore, debug: ignore, verbose: ignore };
}
