/**
 * What keeps tracing cheap per delivery: the sampler's pipeline rule, the Redis statements, and the
 * BullMQ housekeeping spans that are not started. The spans themselves are checked end to end
 * by tracing.int.test.ts and delivery-worker's traces.int.test.ts.
 */
import { describe, expect, it } from "@jest/globals";
import { ROOT_CONTEXT, SamplingDecision, SpanKind, TraceFlags, trace, type Attributes, type Context } from "@opentelemetry/api";
import { isTracingSuppressed } from "@opentelemetry/core";
import { AlwaysOnSampler } from "@opentelemetry/sdk-trace-node";
import type { Telemetry } from "bullmq";
import { PlatformBullMQTelemetry, PlatformSampler, redisStatement } from "./tracing-sdk.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
/** A context under a recorded span of this process. */
const under = (spanId: string): Context => trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE, spanId, traceFlags: TraceFlags.SAMPLED });

describe("redisStatement", () => {
  it("names the command and its first key, never the values", () => {
    expect(redisStatement("set", ["vw:k", "secret value"])).toBe("set vw:k [1 other arguments]");
    expect(redisStatement("get", ["vw:k"])).toBe("get vw:k");
    expect(redisStatement("zadd", [Buffer.from("vw:z"), "1", "m"])).toBe("zadd vw:z [2 other arguments]");
    expect(redisStatement("ping", [])).toBe("ping");
  });

  it("names a Lua call's first key instead of its script or digest and its arguments (job payloads)", () => {
    const payload = JSON.stringify({ data: "x".repeat(5000) });
    expect(redisStatement("evalsha", ["f".repeat(40), "2", "bull:q:wait", "bull:q:active", payload])).toBe("evalsha bull:q:wait [4 other arguments]");
    expect(redisStatement("eval", ["return redis.call('GET', KEYS[1])", 1, "vw:k"])).toBe("eval vw:k [2 other arguments]");
    expect(redisStatement("eval", ["return 1", 0])).toBe("eval [2 arguments]");
  });
});

describe("PlatformSampler", () => {
  const sample = (sampler: PlatformSampler, ctx: Context, attributes: Attributes = {}) => sampler.shouldSample(ctx, TRACE, "evalsha", SpanKind.CLIENT, attributes, []).decision;

  it("records the first of the Redis commands one pipeline or MULTI sends under a span, not the others", async () => {
    const sampler = new PlatformSampler(new AlwaysOnSampler());
    const pipelined = { "db.operation.name": "PIPELINE evalsha" };
    const a = under("00f067aa0ba902b7");
    const b = under("11f067aa0ba902b7");
    expect([sample(sampler, a, pipelined), sample(sampler, a, pipelined), sample(sampler, a, pipelined)]).toEqual([
      SamplingDecision.RECORD_AND_SAMPLED,
      SamplingDecision.NOT_RECORD,
      SamplingDecision.NOT_RECORD,
    ]);
    // Another parent's pipeline, and commands sent on their own, are recorded.
    expect(sample(sampler, b, { "db.operation.name": "MULTI set" })).toBe(SamplingDecision.RECORD_AND_SAMPLED);
    expect(sample(sampler, a, { "db.operation.name": "evalsha" })).toBe(SamplingDecision.RECORD_AND_SAMPLED);
    // The next pipeline under the same span, sent later, gets its span.
    await Promise.resolve();
    expect(sample(sampler, b, { "db.operation.name": "MULTI set" })).toBe(SamplingDecision.RECORD_AND_SAMPLED);
  });
});

describe("PlatformBullMQTelemetry", () => {
  type BullSpan = ReturnType<Telemetry<Context>["tracer"]["startSpan"]>;
  const started: { name: string; attributes: Record<string, unknown>; events: string[] }[] = [];
  const inner: Telemetry<Context> = {
    contextManager: { with: (_ctx, fn) => fn(), active: () => ROOT_CONTEXT, getMetadata: () => "", fromMetadata: (ctx) => ctx },
    tracer: {
      startSpan: (name): BullSpan => {
        const record = { name, attributes: {} as Record<string, unknown>, events: [] as string[] };
        started.push(record);
        return {
          setSpanOnContext: (ctx: Context) => ctx,
          setAttribute: (key, value) => void (record.attributes[key] = value),
          setAttributes: (attributes) => void Object.assign(record.attributes, attributes),
          addEvent: (name) => void record.events.push(name),
          recordException: () => undefined,
          end: () => undefined,
        };
      },
    },
  };
  const telemetry = new PlatformBullMQTelemetry(inner);

  it("starts no trace for a queue's housekeeping, but does under a span", () => {
    const span = telemetry.tracer.startSpan("promoteJobs webhook-deliveries", { kind: 0 }, ROOT_CONTEXT);
    expect(started).toEqual([]);
    // No parent there: the pg and ioredis instrumentations (requireParentSpan) skip its calls at once.
    const inside = span.setSpanOnContext(ROOT_CONTEXT);
    expect(isTracingSuppressed(inside)).toBe(true);
    expect(trace.getSpan(inside)).toBeUndefined();
    telemetry.tracer.startSpan("close webhook-deliveries", { kind: 0 }, under("00f067aa0ba902b7"));
    expect(started.map((s) => s.name)).toEqual(["close webhook-deliveries"]);
    started.length = 0;
  });
});
