/**
 * The process's tracing state, a leaf module: the logger reads the active span's ids from here
 * and the SDK module builds what is stored here, without either importing tracing.ts.
 */
import { trace, type Tracer } from "@opentelemetry/api";
import type { Telemetry } from "bullmq";

/** What the SDK module hands back once started. */
export interface TracingRuntime {
  tracer: Tracer;
  /** BullMQ's `telemetry` option (bullmq-otel). */
  bullmq: Telemetry;
  /** Sends what is buffered and stops. */
  shutdown: () => Promise<void>;
}

let runtime: TracingRuntime | null = null;

/** The started SDK's handles, or null while tracing is off. */
export function currentRuntime(): TracingRuntime | null {
  return runtime;
}

/** Set by startTracing (null again at shutdown). */
export function setRuntime(next: TracingRuntime | null): void {
  runtime = next;
}

/** `trace_id` and `span_id` of the active span, for log lines; empty when there is none. */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  if (runtime === null) return {};
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
