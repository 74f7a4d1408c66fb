/**
 * A small OTLP/HTTP trace receiver for tests and benchmarks: `POST /v1/traces` in `http/json`
 * (`application/json`) or `http/protobuf` (`application/x-protobuf`, decoded by protobufjs from the
 * OTLP trace schema below), optionally gzip-compressed. It keeps every span it was sent, flattened
 * with its service name, and answers as a collector does (an empty ExportTraceServiceResponse).
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import protobuf from "protobufjs";

/**
 * The messages of OTLP's `opentelemetry/proto/collector/trace/v1` request and the trace, resource
 * and common messages it uses, with the field numbers of the OpenTelemetry protocol (v1).
 */
const OTLP_TRACE_SCHEMA = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
message ExportTracePartialSuccess { int64 rejected_spans = 1; string error_message = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4; fixed32 flags = 16;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9; uint32 dropped_attributes_count = 10;
  repeated Event events = 11; uint32 dropped_events_count = 12; repeated Link links = 13; uint32 dropped_links_count = 14;
  Status status = 15;
}
message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; uint32 dropped_attributes_count = 5; fixed32 flags = 6; }
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
`;

const schema = protobuf.parse(OTLP_TRACE_SCHEMA, { keepCase: false }).root;
const RequestType = schema.lookupType("otlp.ExportTraceServiceRequest");

/** An attribute value as received (int64 values become numbers). */
export type AttributeValue = string | number | boolean | AttributeValue[] | { [key: string]: AttributeValue } | null;

/** One span as received, with its resource's `service.name`. */
export interface ReceivedSpan {
  service: string;
  /** Hex, 32 characters. */
  traceId: string;
  /** Hex, 16 characters. */
  spanId: string;
  /** Hex, or "" for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  links: { traceId: string; spanId: string }[];
  /** How it arrived. */
  protocol: "http/json" | "http/protobuf";
}

/** A running receiver. */
export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`: give it as OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string;
  /** Every span received so far. */
  readonly spans: ReceivedSpan[];
  /** Export requests received, by protocol. */
  readonly requests: { "http/json": number; "http/protobuf": number };
  /** Bytes of the export requests received (as sent, before decompression). */
  readonly bytes: { total: number };
  /** Requests that could not be decoded (answered 400). */
  readonly rejected: string[];
  close(): Promise<void>;
}

/**
 * Starts a receiver on a free loopback port. With `decode: false` it only counts requests and
 * bytes and answers (a sink for benchmarks, where decoding every span would take the CPU being
 * measured).
 */
export async function startOtlpReceiver(options: { decode?: boolean } = {}): Promise<OtlpReceiver> {
  const decode = options.decode ?? true;
  const bytes = { total: 0 };
  const spans: ReceivedSpan[] = [];
  const requests = { "http/json": 0, "http/protobuf": 0 };
  const rejected: string[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      const body = await readBody(req, bytes);
      const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim();
      try {
        if (type === "application/json") {
          if (decode) spans.push(...fromJson(JSON.parse(body.toString("utf8")) as JsonRequest));
          requests["http/json"] += 1;
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
        } else if (type === "application/x-protobuf") {
          if (decode) spans.push(...fromProtobuf(body));
          requests["http/protobuf"] += 1;
          res.writeHead(200, { "content-type": "application/x-protobuf" }).end(Buffer.alloc(0));
        } else {
          rejected.push(`content-type ${type ?? "(none)"}`);
          res.writeHead(415).end();
        }
      } catch (err) {
        rejected.push((err as Error).message);
        res.writeHead(400).end();
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    bytes,
    rejected,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(req: IncomingMessage, bytes: { total: number }): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  bytes.total += raw.length;
  return req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
}

interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
  kvlistValue?: { values?: JsonKeyValue[] };
  bytesValue?: string;
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: JsonKeyValue[];
  status?: { code?: number };
  links?: { traceId: string; spanId: string }[];
}
interface JsonRequest {
  resourceSpans?: { resource?: { attributes?: JsonKeyValue[] }; scopeSpans?: { spans?: JsonSpan[] }[] }[];
}

/** OTLP/JSON: ids are hex strings, enums integers, int64 decimal strings. */
function fromJson(request: JsonRequest): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const service = String(attributesOf(rs.resource?.attributes)["service.name"] ?? "");
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          name: s.name,
          kind: s.kind ?? 0,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: attributesOf(s.attributes),
          statusCode: s.status?.code ?? 0,
          links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
          protocol: "http/json",
        });
      }
    }
  }
  return out;
}

/** OTLP/protobuf, decoded with protobufjs; the decoded messages have the JSON mapping's field names. */
function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const decoded = RequestType.toObject(RequestType.decode(body), { longs: String, enums: Number, bytes: String, defaults: false }) as unknown as ProtoRequest;
  const hex = (b64: string | undefined) => Buffer.from(b64 ?? "", "base64").toString("hex");
  const out: ReceivedSpan[] = [];
  for (const rs of decoded.resourceSpans ?? []) {
    const service = String(attributesOf(rs.resource?.attributes)["service.name"] ?? "");
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          service,
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          name: s.name ?? "",
          kind: s.kind ?? 0,
          startNs: BigInt(s.startTimeUnixNano ?? "0"),
          endNs: BigInt(s.endTimeUnixNano ?? "0"),
          attributes: attributesOf(s.attributes),
          statusCode: s.status?.code ?? 0,
          links: (s.links ?? []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
          protocol: "http/protobuf",
        });
      }
    }
  }
  return out;
}

interface ProtoSpan {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  name?: string;
  kind?: number;
  startTimeUnixNano?: string;
  endTimeUnixNano?: string;
  attributes?: JsonKeyValue[];
  status?: { code?: number };
  links?: { traceId?: string; spanId?: string }[];
}
interface ProtoRequest {
  resourceSpans?: { resource?: { attributes?: JsonKeyValue[] }; scopeSpans?: { spans?: ProtoSpan[] }[] }[];
}

function attributesOf(list: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of list ?? []) out[kv.key] = valueOf(kv.value);
  return out;
}

function valueOf(v: JsonAnyValue | undefined): AttributeValue {
  if (v === undefined) return null;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  if (v.kvlistValue !== undefined) return attributesOf(v.kvlistValue.values);
  if (v.bytesValue !== undefined) return v.bytesValue;
  return null;
}
