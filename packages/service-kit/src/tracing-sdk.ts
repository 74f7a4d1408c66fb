/**
 * The OpenTelemetry SDK set-up, imported by `startTracing` only when an endpoint is configured:
 * a process with tracing off never loads this module nor anything it imports.
 */
import { createRequire } from "node:module";
import { context, diag, trace, DiagLogLevel, type Attributes, type Context, type Link, type SpanKind } from "@opentelemetry/api";
import { suppressTracing } from "@opentelemetry/core";
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
import type { Telemetry } from "bullmq";
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
 * The sampler every process uses: the configured one (OTEL_TRACES_SAMPLER), except that of the
 * Redis commands one pipeline or MULTI transaction sends together (BullMQ's `addBulk`: one script
 * call per job, thousands for one request), only the first gets a span, whatever that sampler is
 * (`always_on` included); it stands for the round trip. They are sent in one synchronous run, so
 * "together" is "under the same parent before the next microtask".
 */
export class PlatformSampler implements Sampler {
  private batchParent: string | undefined;

  constructor(private readonly inner: Sampler) {}

  shouldSample(ctx: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    const parent = trace.getSpanContext(ctx);
    if (parent !== undefined && isBatchedRedisCommand(attributes)) {
      if (this.batchParent === parent.spanId) return { decision: SamplingDecision.NOT_RECORD };
      this.batchParent = parent.spanId;
      queueMicrotask(() => {
        this.batchParent = undefined;
      });
    }
    return this.inner.shouldSample(ctx, traceId, name, kind, attributes, links);
  }

  toString(): string {
    return `Platform{${this.inner.toString()}}`;
  }
}

/** A command the ioredis instrumentation saw queued in a pipeline or a MULTI (it prefixes its operation name), or MULTI/EXEC themselves. */
function isBatchedRedisCommand(attributes: Attributes): boolean {
  const operation = attributes["db.operation.name"];
  if (typeof operation !== "string") return false;
  return operation.startsWith("PIPELINE ") || operation.startsWith("MULTI ") || operation === "multi" || operation === "exec";
}

/**
 * `db.query.text` of a Redis span: the command and its first key, never the values. A Lua call
 * (`evalsha`, `eval`) names its first key instead of the script or its digest: BullMQ's scripts
 * take whole job payloads and options as arguments, which would make every span kilobytes long
 * and copy customers' event data into the traces.
 */
export function redisStatement(command: string, args: readonly unknown[]): string {
  let first = 0;
  if (/^(evalsha|eval)(_ro)?$/i.test(command)) {
    const keys = Number(args[1]);
    if (!(keys > 0)) return args.length === 0 ? command : `${command} [${args.length} arguments]`;
    first = 2;
  }
  if (args.length <= first) return args.length === 0 ? command : `${command} [${args.length} arguments]`;
  const key = args[first];
  const rest = args.length - 1;
  return `${command} ${Buffer.isBuffer(key) ? key.toString("utf8") : String(key)}${rest > 0 ? ` [${rest} other arguments]` : ""}`;
}

/**
 * BullMQ's `telemetry` option of the Queues (bullmq-otel): a job added carries its adder's trace
 * context, and an `add`/`addBulk` is a span of that trace. A queue's housekeeping with no span
 * around it (pausing, closing, trimming events, promoting jobs) starts no trace: a trace per timer
 * tick says nothing of any event, and its Redis calls make no spans either. Workers do not take
 * this option: `withJobSpan` (tracing.ts) opens a job's span around the processor alone.
 */
export class PlatformBullMQTelemetry implements Telemetry<Context> {
  readonly contextManager: Telemetry<Context>["contextManager"];
  readonly tracer: Telemetry<Context>["tracer"];

  constructor(inner: Telemetry<Context>) {
    this.contextManager = inner.contextManager;
    this.tracer = {
      startSpan: (name, options, ctx) => {
        if (BULLMQ_HOUSEKEEPING.test(name) && trace.getSpan(ctx ?? context.active()) === undefined) return UNTRACED;
        return inner.tracer.startSpan(name, options, ctx);
      },
    };
  }
}

const BULLMQ_HOUSEKEEPING = /^(extendLocks|startStalledCheckTimer|moveStalledJobsToWait|rateLimit|pause|resume|close|trimEvents|promoteJobs)( |$)/;

type BullSpan = ReturnType<Telemetry<Context>["tracer"]["startSpan"]>;

/**
 * What BullMQ is handed instead of a span: its work runs without a span (so the pg and ioredis
 * instrumentations, which require a parent, skip its calls at their first check) and with tracing
 * suppressed (so nothing else starts a trace there).
 */
const UNTRACED: BullSpan = {
  setSpanOnContext: (ctx: Context) => suppressTracing(trace.deleteSpan(ctx)),
  setAttribute: () => undefined,
  setAttributes: () => undefined,
  addEvent: () => undefined,
  recordException: () => undefined,
  end: () => undefined,
};

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
    sampler: new PlatformSampler(samplerOf(config.sampler, config.samplerRatio)),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  provider.register();
  // Only spans under one of ours: a query of a timer (the reconciler's sweep) starts no trace. A
  // pool's connect is not a span (the query's span holds its wait); Redis statements name keys, not values.
  const instrumentations = [
    new PgInstrumentation({ requireParentSpan: true, ignoreConnectSpans: true }),
    new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: redisStatement }),
  ];
  const require = createRequire(import.meta.url);
  const pgRequire = createRequire(require.resolve("pg"));
  for (const id of ["pg", "ioredis"]) require(id);
  pgRequire("pg-pool");
  return {
    tracer: provider.getTracer(TRACER_NAME),
    bullmq: new PlatformBullMQTelemetry(new BullMQOtel({ tracerName: "bullmq" })),
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
