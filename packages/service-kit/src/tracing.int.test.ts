/**
 * The tracing helpers with the SDK on, exporting to an in-process OTLP/HTTP receiver: the request
 * middleware (continuing a caller's traceparent, named after the route), `withSpan` (what Test,
 * Replay, recover, the auth hook and the intake use), `traceAttempt`, the log mixin, BullMQ's
 * propagation metadata and the job spans continuing it (`withJobSpan`).
 */
import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, startOtlpReceiver, type OtlpReceiver } from "@vw/testing";
import { createApp, listen, closeServer } from "./http.js";
import { createLogger } from "./logger.js";
import { queueTelemetryOption, startTracing, traceAttempt, traceDeliveryAttempt, traceMetadata, withJobSpan, withSpan, type Tracing } from "./tracing.js";

let receiver: OtlpReceiver;
let tracing: Tracing;
const logLines: string[] = [];
const logStream = new PassThrough();
logStream.on("data", (chunk: Buffer) => logLines.push(...chunk.toString("utf8").split("\n").filter((l) => l !== "")));
const logger = createLogger("kit-test", "info", "json", logStream);

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  tracing = await startTracing(
    { endpoint: `${receiver.url}/v1/traces`, protocol: "http/json", serviceName: "kit-under-test", sampler: "always_on", samplerRatio: 1 },
    "kit",
    logger,
  );
});

afterAll(async () => {
  await tracing?.shutdown();
  await receiver?.close();
});

it("a request continues the caller's trace; spans, attempt attributes and log lines hang together", async () => {
  expect(tracing.enabled).toBe(true);
  expect(queueTelemetryOption().telemetry).toBeDefined();
  let metadata: string | undefined;
  const app = createApp(logger);
  app.post("/things/:id/test", async (_req, res) => {
    const answer = await withSpan("endpoint test", { "webhook.endpoint_id": "e-1" }, async (span) => {
      logger.info("inside the test span");
      metadata = traceMetadata();
      span.setAttributes({ extra: true });
      return traceAttempt("https://hooks.example.test:8443/in?token=secret-token", { deliveryId: "d-1", endpointId: "e-1", trigger: "test" }, async () => ({
        verdict: "retry",
        durationMs: 12,
        responseStatus: 503,
        errorKind: null,
      }));
    });
    res.status(200).json({ verdict: answer.verdict });
  });
  const server = await listen(app, 0, "127.0.0.1");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const traceId = randomBytes(16).toString("hex");
  const callerSpanId = randomBytes(8).toString("hex");
  try {
    const res = await fetch(`http://127.0.0.1:${port}/things/42/test`, { method: "POST", headers: { traceparent: `00-${traceId}-${callerSpanId}-01` } });
    expect(res.status).toBe(200);
  } finally {
    await closeServer(server);
  }
  await eventually("the three spans were exported", () => receiver.spans.filter((s) => s.traceId === traceId).length >= 3, { timeoutMs: 15_000 });
  const spans = receiver.spans.filter((s) => s.traceId === traceId);
  const server_ = spans.find((s) => s.kind === 2);
  expect(server_).toMatchObject({ service: "kit-under-test", name: "POST /things/:id/test", parentSpanId: callerSpanId, protocol: "http/json" });
  expect(server_?.attributes).toMatchObject({ "http.route": "/things/:id/test", "http.response.status_code": 200 });
  const test = spans.find((s) => s.name === "endpoint test");
  expect(test).toMatchObject({ parentSpanId: server_?.spanId, attributes: { "webhook.endpoint_id": "e-1", extra: true } });
  const attempt = spans.find((s) => s.name === "webhook attempt");
  expect(attempt).toMatchObject({ parentSpanId: test?.spanId, kind: 3, statusCode: 2 });
  expect(attempt?.attributes).toEqual({
    "http.request.method": "POST",
    "server.address": "hooks.example.test",
    "server.port": 8443,
    "url.scheme": "https",
    "webhook.delivery_id": "d-1",
    "webhook.endpoint_id": "e-1",
    "webhook.trigger": "test",
    "webhook.verdict": "retry",
    "webhook.duration_ms": 12,
    "http.response.status_code": 503,
  });
  // The job metadata BullMQ stores carries this trace, and the log line the span it was written in.
  expect(JSON.parse(metadata ?? "{}")).toMatchObject({ traceparent: `00-${traceId}-${test?.spanId}-01` });
  const line = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "inside the test span");
  expect(line).toMatchObject({ trace_id: traceId, span_id: test?.spanId });
  // A URL's query (a customer's token) never reaches a span.
  expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain("secret-token");
});

it("a job's run continues the trace its metadata carries; a DelayedError is no failure", async () => {
  const traceId = randomBytes(16).toString("hex");
  const adderSpanId = randomBytes(8).toString("hex");
  const job = (id: string, metadata: string | undefined) => ({ id, name: "deliver.v2", queueName: "webhook-deliveries", attemptsStarted: 2, opts: { telemetry: { metadata } } });
  const metadata = JSON.stringify({ traceparent: `00-${traceId}-${adderSpanId}-01` });
  await withJobSpan(job("j-1", metadata), async () => {
    logger.info("inside the job span");
    return traceAttempt("http://127.0.0.1:9/in", { deliveryId: "d-1", endpointId: "e-1" }, async () => ({ verdict: "delivered", durationMs: 1, responseStatus: 200, errorKind: null }));
  });
  class DelayedError extends Error {
    override name = "DelayedError";
  }
  await expect(withJobSpan(job("j-2", metadata), () => Promise.reject(new DelayedError("moved")))).rejects.toThrow("moved");
  await expect(withJobSpan(job("j-3", metadata), () => Promise.reject(new Error("database down")))).rejects.toThrow("database down");
  // Metadata that is not bullmq-otel's JSON starts a trace of its own rather than failing the job.
  await expect(withJobSpan(job("j-4", "not json"), async () => 4)).resolves.toBe(4);
  // Read once and remembered, the same metadata still gives each job a span, and a trace of its own when it names none.
  await expect(withJobSpan(job("j-5", "not json"), async () => 5)).resolves.toBe(5);
  await eventually("the job spans were exported", () => receiver.spans.filter((s) => s.name === "process webhook-deliveries").length >= 5, { timeoutMs: 15_000 });
  const jobs = receiver.spans.filter((s) => s.name === "process webhook-deliveries");
  const run = (id: string) => jobs.find((s) => s.attributes["bullmq.job.id"] === id);
  expect(run("j-1")).toMatchObject({ traceId, parentSpanId: adderSpanId, kind: 5, statusCode: 0 });
  expect(run("j-1")?.attributes).toEqual({ "bullmq.queue.name": "webhook-deliveries", "bullmq.job.id": "j-1", "bullmq.job.name": "deliver.v2", "bullmq.job.attempts.started": 2 });
  const attempt = receiver.spans.find((s) => s.name === "webhook attempt" && s.traceId === traceId);
  expect(attempt?.parentSpanId).toBe(run("j-1")?.spanId);
  const logged = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "inside the job span");
  expect(logged).toMatchObject({ trace_id: traceId, span_id: run("j-1")?.spanId });
  expect(run("j-2")).toMatchObject({ traceId, statusCode: 0 });
  expect(run("j-3")).toMatchObject({ traceId, statusCode: 2 });
  expect(run("j-4")?.traceId).not.toBe(traceId);
  expect(run("j-4")?.parentSpanId ?? "").toBe("");
  expect(run("j-5")?.traceId).not.toBe(run("j-4")?.traceId);
  expect(run("j-2")?.spanId).not.toBe(run("j-1")?.spanId);
});

it("a drain's attempt is one span continuing its delivery's stored context; what follows it logs in that span", async () => {
  const traceId = randomBytes(16).toString("hex");
  const intakeSpanId = randomBytes(8).toString("hex");
  const metadata = JSON.stringify({ traceparent: `00-${traceId}-${intakeSpanId}-01` });
  const answer = { verdict: "retry", durationMs: 7, responseStatus: 500, errorKind: null };
  const ids = { deliveryId: "d-drain", endpointId: "e-drain", trigger: "retry", attemptNumber: 2 };
  const after = await traceDeliveryAttempt("http://127.0.0.1:9/in", ids, metadata, async () => answer, async (sent) => {
    logger.info("after the drain's attempt");
    return sent.verdict;
  });
  expect(after).toBe("retry");
  // No stored context (a delivery that had none): a trace of its own; a send that throws fails the span and reaches the caller.
  await expect(
    traceDeliveryAttempt("http://127.0.0.1:9/in", { deliveryId: "d-none", endpointId: "e-drain" }, undefined, () => Promise.reject(new Error("socket gone")), async () => "unreached"),
  ).rejects.toThrow("socket gone");
  await eventually("both attempt spans were exported", () => receiver.spans.filter((s) => s.name === "webhook attempt" && ["d-drain", "d-none"].includes(String(s.attributes["webhook.delivery_id"]))).length >= 2, {
    timeoutMs: 15_000,
  });
  const attempt = receiver.spans.find((s) => s.attributes["webhook.delivery_id"] === "d-drain");
  expect(attempt).toMatchObject({ traceId, parentSpanId: intakeSpanId, kind: 3, statusCode: 2 });
  expect(attempt?.attributes).toMatchObject({ "webhook.attempt_number": 2, "webhook.trigger": "retry", "webhook.verdict": "retry", "http.response.status_code": 500 });
  const logged = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "after the drain's attempt");
  expect(logged).toMatchObject({ trace_id: traceId, span_id: attempt?.spanId });
  const orphan = receiver.spans.find((s) => s.attributes["webhook.delivery_id"] === "d-none");
  expect(orphan?.traceId).not.toBe(traceId);
  expect(orphan?.parentSpanId ?? "").toBe("");
  expect(orphan?.statusCode).toBe(2);
});
