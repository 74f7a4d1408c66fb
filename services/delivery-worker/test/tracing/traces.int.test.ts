/**
 * OpenTelemetry traces across the deployables, as an operator's collector receives them: an OTLP/HTTP
 * receiver started here, event-ingest (exporting in `http/json`) and delivery-worker (in
 * `http/protobuf`) as separate processes on private stores. One event, posted with a W3C
 * `traceparent`, fans out to a receiver that answers 200, one that answers 500 then 200, and one
 * that answers 410; the test follows its one trace from the intake to each receiver's answer.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "@vw/testing";
import { FAULT_TEST_TIMEOUT_MS, startFaultStack, type FaultStack } from "../faults/fault-stack.js";

let otlp: OtlpReceiver;
let stack: FaultStack;
let retriedCalls = 0;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_TRACES_SAMPLER: "parentbased_always_on", OTEL_BSP_SCHEDULE_DELAY: "200" };
  stack = await startFaultStack({
    receivers: [
      200,
      (_req, res) => {
        retriedCalls += 1;
        res.statusCode = retriedCalls === 1 ? 500 : 200;
        res.end("ok");
      },
      410,
    ],
    retryDelays: "1s",
    env: tracing,
    serviceEnv: {
      ingest: { OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_SERVICE_NAME: "ingest-under-test" },
      worker: { OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" },
    },
  });
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await otlp?.close();
}, FAULT_TEST_TIMEOUT_MS);

/** The spans of one trace received so far. */
const traceSpans = (traceId: string): ReceivedSpan[] => otlp.spans.filter((s) => s.traceId === traceId);

it(
  "one trace from the intake to each receiver's answer: delivered, retried then delivered, gone (410); no trace header reaches a receiver",
  async () => {
    const traceId = randomBytes(16).toString("hex");
    const callerSpanId = randomBytes(8).toString("hex");
    const eventId = randomUUID();
    const res = await fetch(`${stack.ingest.url}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.ingestToken}`, "content-type": "application/json", traceparent: `00-${traceId}-${callerSpanId}-01` },
      body: JSON.stringify({ id: eventId, world: stack.worldRef, type: "visitor.registered", timestamp: new Date().toISOString(), data: { uuid: eventId, name: "Ada", email: "ada@example.com", via: "sso" } }),
    });
    expect(res.status).toBe(202);
    const [ok, retried, gone] = stack.endpoints as [FaultStack["endpoints"][number], FaultStack["endpoints"][number], FaultStack["endpoints"][number]];
    await eventually("each receiver answered: 200; 500 then 200; 410", () => ok.answered.length === 1 && retried.answered.length === 2 && gone.answered.length === 1, { timeoutMs: 30_000 });

    // Internal ids stay internal: no W3C or B3 header on any webhook request.
    for (const e of stack.endpoints) {
      for (const r of e.receiver.received) {
        expect(Object.keys(r.headers).filter((h) => /^(traceparent|tracestate|baggage|b3|x-b3-.*)$/i.test(h))).toEqual([]);
      }
    }

    const attemptsOf = (port: number) => traceSpans(traceId).filter((s) => s.name === "webhook attempt" && s.attributes["server.port"] === port);
    await eventually(
      "the worker exported the four attempts of the trace",
      () => attemptsOf(ok.receiver.port).length === 1 && attemptsOf(retried.receiver.port).length === 2 && attemptsOf(gone.receiver.port).length === 1,
      { timeoutMs: 30_000 },
    );
    const spans = traceSpans(traceId);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const parentOf = (s: ReceivedSpan): ReceivedSpan => {
      const parent = byId.get(s.parentSpanId);
      if (parent === undefined) throw new Error(`the parent ${s.parentSpanId} of ${s.service}/${s.name} was not received`);
      return parent;
    };

    // event-ingest: the request's server span continues the caller's traceparent; the intake span is its child.
    const server = spans.find((s) => s.service === "ingest-under-test" && s.kind === 2);
    expect(server).toMatchObject({ name: "POST /v1/events", parentSpanId: callerSpanId, protocol: "http/json" });
    expect(server?.attributes).toMatchObject({ "http.route": "/v1/events", "http.response.status_code": 202, "http.request.method": "POST" });
    const intake = spans.find((s) => s.name === "event intake");
    expect(intake).toMatchObject({ service: "ingest-under-test", parentSpanId: server?.spanId });
    expect(intake?.attributes).toMatchObject({ "events.count": 1, "events.accepted": 1, "webhook.deliveries": 3 });

    // delivery-worker: every attempt is a child of the intake (the context its delivery carries),
    // numbered; nothing stands between them (no BullMQ job stands for one delivery).
    const expectations: [number, { status: number; verdict: string; n: number }[]][] = [
      [ok.receiver.port, [{ status: 200, verdict: "delivered", n: 1 }]],
      [
        retried.receiver.port,
        [
          { status: 500, verdict: "retry", n: 1 },
          { status: 200, verdict: "delivered", n: 2 },
        ],
      ],
      [gone.receiver.port, [{ status: 410, verdict: "gone", n: 1 }]],
    ];
    for (const [port, answers] of expectations) {
      const attempts = attemptsOf(port).sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
      expect(attempts.map((a) => ({ status: a.attributes["http.response.status_code"], verdict: a.attributes["webhook.verdict"], n: a.attributes["webhook.attempt_number"] }))).toEqual(answers);
      for (const attempt of attempts) {
        expect(attempt).toMatchObject({ service: "delivery-worker", kind: 3, protocol: "http/protobuf" });
        expect(attempt.attributes).toMatchObject({ "server.address": "127.0.0.1", "http.request.method": "POST", "url.scheme": "http" });
        expect(typeof attempt.attributes["webhook.duration_ms"]).toBe("number");
        expect(attempt.attributes["webhook.delivery_id"]).toEqual(expect.stringMatching(/^[0-9a-f-]{36}$/));
        expect(parentOf(attempt)).toBe(intake);
      }
      // A retry is a second attempt span of the same delivery.
      expect(new Set(attempts.map((a) => a.attributes["webhook.delivery_id"])).size).toBe(1);
    }
    expect(spans.filter((s) => s.service === "delivery-worker" && s.name === "process webhook-deliveries")).toEqual([]);

    // event-ingest's PostgreSQL and Redis calls are child spans in the same trace. (The worker's
    // are not: a drain's claims and group commits serve many deliveries at once, so its part of
    // a delivery's trace is the attempts above.)
    const dbSpans = (system: string, service: string) =>
      spans.filter((s) => s.service === service && (s.attributes["db.system"] === system || s.attributes["db.system.name"] === system) && byId.has(s.parentSpanId));
    expect(dbSpans("postgresql", "ingest-under-test").length).toBeGreaterThan(0);
    expect(dbSpans("redis", "ingest-under-test").length).toBeGreaterThan(0);

    // The event's data stays out of the trace: Redis statements name keys, never arguments (job payloads).
    for (const s of spans) expect(JSON.stringify(s.attributes)).not.toContain("ada@example.com");

    // Both encodings arrived and were decoded.
    expect(otlp.requests["http/json"]).toBeGreaterThan(0);
    expect(otlp.requests["http/protobuf"]).toBeGreaterThan(0);
    expect(otlp.rejected).toEqual([]);

    // A log line written inside a span carries its trace_id and span_id (the 410's endpoint disable).
    const lines = stack.worker
      .stdout()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { trace_id?: string; span_id?: string });
    const traced = lines.filter((l) => l.trace_id === traceId);
    expect(traced.length).toBeGreaterThan(0);
    for (const line of traced) expect(byId.has(line.span_id ?? "")).toBe(true);
  },
  FAULT_TEST_TIMEOUT_MS,
);
