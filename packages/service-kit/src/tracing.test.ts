import { describe, expect, it } from "@jest/globals";
import { ConfigError, parseEnv } from "./config.js";
import { createLogger } from "./logger.js";
import { queueTelemetryOption, readTracing, startTracing, traceLogFields, traceMetadata, tracingEnabled, withSpan } from "./tracing.js";

const read = (env: Record<string, string>) => parseEnv(env, (r) => readTracing(r));

function problemsOf(env: Record<string, string>): string[] {
  try {
    read(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("accepted");
}

describe("readTracing", () => {
  it("is off without an endpoint, with the specification's defaults", () => {
    expect(read({})).toEqual({ endpoint: null, protocol: "http/protobuf", serviceName: null, sampler: "parentbased_always_on", samplerRatio: 1 });
  });

  it("appends /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT, and takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is", () => {
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).endpoint).toBe("http://collector:4318/v1/traces");
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://b/otlp/traces" }).endpoint).toBe("https://b/otlp/traces");
  });

  it("reads the protocol, the service name and the sampler with its argument", () => {
    expect(
      read({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "ingest-eu",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.25",
      }),
    ).toEqual({ endpoint: "http://c:4318/v1/traces", protocol: "http/json", serviceName: "ingest-eu", sampler: "parentbased_traceidratio", samplerRatio: 0.25 });
    expect(read({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" }).protocol).toBe("http/protobuf");
  });

  it("is off when OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none says so", () => {
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }).endpoint).toBeNull();
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }).endpoint).toBeNull();
  });

  it("names each bad variable", () => {
    expect(
      problemsOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_TRACES_SAMPLER: "traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "2",
        OTEL_TRACES_EXPORTER: "zipkin",
      }),
    ).toEqual([
      expect.stringContaining("OTEL_EXPORTER_OTLP_ENDPOINT"),
      expect.stringContaining("OTEL_EXPORTER_OTLP_PROTOCOL must be one of http/protobuf, http/json"),
      expect.stringContaining("OTEL_TRACES_SAMPLER_ARG must be a number between 0 and 1"),
      expect.stringContaining("OTEL_TRACES_EXPORTER must be otlp or none"),
    ]);
    expect(problemsOf({ OTEL_TRACES_SAMPLER: "jaeger_remote" })).toEqual([expect.stringContaining("OTEL_TRACES_SAMPLER must be one of")]);
  });
});

describe("tracing off", () => {
  it("runs the work as it is, and adds nothing to jobs or log lines", async () => {
    const tracing = await startTracing(read({}), "test", createLogger("test", "silent"));
    expect(tracing.enabled).toBe(false);
    expect(tracingEnabled()).toBe(false);
    await expect(withSpan("work", {}, async () => 42)).resolves.toBe(42);
    expect(traceMetadata()).toBeUndefined();
    expect(queueTelemetryOption()).toEqual({});
    expect(traceLogFields()).toEqual({});
  });
});
