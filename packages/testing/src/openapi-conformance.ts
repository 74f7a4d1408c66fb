/**
 * OpenAPI conformance of the integration suites: a recorder attached to a service's HTTP server
 * keeps every request and answer the tests exchange, then checks each against the service's OpenAPI
 * document: the route is described (or the answer is a 404/405 problem), the status is one the
 * operation lists, the answer's media type is declared and its body validates against the schema
 * for that status, and a request that succeeded validates against the request body's schema.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { ALWAYS_PROBLEMS, createAjv, type Ajv2020, type ErrorObject } from "@vw/contracts";

/** One request and its answer, as the server saw them. */
export interface RecordedExchange {
  method: string;
  /** The request target without the query string, still percent-encoded. */
  path: string;
  requestContentType: string | undefined;
  requestBody: Buffer;
  /** True when more than {@link MAX_RECORDED_BYTES} were sent (the body is then not checked). */
  requestTruncated: boolean;
  status: number;
  responseHeaders: Record<string, string | string[] | number | undefined>;
  responseBody: Buffer;
  responseTruncated: boolean;
}

/** Bodies larger than this are not kept (nor checked); the status and media type still are. */
export const MAX_RECORDED_BYTES = 1024 * 1024;

type JsonObject = Record<string, unknown>;
interface MediaType {
  schema?: JsonObject;
}
interface ResponseObject {
  content?: Record<string, MediaType>;
}
interface OperationObject {
  parameters?: JsonObject[];
  requestBody?: { required?: boolean; content?: Record<string, MediaType> };
  responses: Record<string, ResponseObject>;
}

interface Template {
  path: string;
  regex: RegExp;
  literals: number;
  item: Record<string, OperationObject>;
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const COMPONENT_PREFIX = "urn:oas:";

/** Matches an answer's or request's media type against the keys of a `content` map. */
function mediaEntry(content: Record<string, MediaType>, contentType: string | undefined): MediaType | undefined {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (content[type]) return content[type];
  const wildcard = `${type.split("/")[0]}/*`;
  return content[wildcard] ?? content["*/*"];
}

const isJsonType = (contentType: string | undefined) => /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(contentType ?? "");

/** Checks the exchanges of a test file against a service's OpenAPI document. */
export class OpenApiConformance {
  readonly exchanges: RecordedExchange[] = [];
  private readonly ajv: Ajv2020;
  private readonly templates: Template[];
  private readonly compiled = new Map<string, ReturnType<Ajv2020["compile"]>>();

  /** `name` (the service) heads the failure message. */
  constructor(
    private readonly document: JsonObject,
    private readonly name = "service",
  ) {
    this.ajv = createAjv();
    const schemas = ((document["components"] as JsonObject | undefined)?.["schemas"] ?? {}) as Record<string, JsonObject>;
    for (const [component, schema] of Object.entries(schemas)) {
      this.ajv.addSchema({ ...(rewriteRefs(schema) as JsonObject), $id: `${COMPONENT_PREFIX}${component}` });
    }
    this.templates = Object.entries((document["paths"] ?? {}) as Record<string, Record<string, OperationObject>>).map(([path, item]) =>
      this.template(path, item),
    );
  }

  /** Records every exchange `server` handles from now on (attach before the tests send requests). */
  attach(server: Server): void {
    server.prependListener("request", (req: IncomingMessage, res: ServerResponse) => this.record(req, res));
  }

  /** Every exchange that does not match the document, one line each. */
  mismatches(): string[] {
    const out: string[] = [];
    for (const exchange of this.exchanges) {
      const problem = this.check(exchange);
      if (problem) out.push(`${exchange.method} ${exchange.path} -> ${exchange.status}: ${problem}`);
    }
    return out;
  }

  /** Throws an error naming route, status and schema error of every mismatch. */
  assertConforms(): void {
    const found = this.mismatches();
    if (found.length === 0) return;
    const shown = found.slice(0, 20).map((line) => `  - ${line}`);
    if (found.length > shown.length) shown.push(`  ... and ${found.length - shown.length} more`);
    throw new Error(`${found.length} answer(s) of ${this.name} do not match its OpenAPI document (GET /openapi.json):\n${shown.join("\n")}`);
  }

  private record(req: IncomingMessage, res: ServerResponse): void {
    // Read now: express rewrites `req.url` while it routes through mounted routers.
    const target = req.url ?? "/";
    const requestChunks: Buffer[] = [];
    let requestBytes = 0;
    // Tapping `emit` sees the body without adding a 'data' listener, which would start the flow
    // before the app's own body parser is attached.
    const emit = req.emit;
    req.emit = function (this: IncomingMessage, event: string | symbol, ...args: unknown[]) {
      if (event === "data" && requestBytes <= MAX_RECORDED_BYTES) {
        const chunk = Buffer.from(args[0] as Uint8Array);
        requestBytes += chunk.length;
        if (requestBytes <= MAX_RECORDED_BYTES) requestChunks.push(chunk);
      }
      return emit.call(this, event, ...args);
    } as typeof req.emit;

    const responseChunks: Buffer[] = [];
    let responseBytes = 0;
    const keep = (chunk: unknown, encoding?: unknown) => {
      if (chunk === undefined || chunk === null || typeof chunk === "function") return;
      const buf = typeof chunk === "string" ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8") : Buffer.from(chunk as Uint8Array);
      responseBytes += buf.length;
      if (responseBytes <= MAX_RECORDED_BYTES) responseChunks.push(buf);
    };
    const write = res.write;
    const end = res.end;
    res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
      keep(chunk, rest[0]);
      return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof res.write;
    res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
      keep(chunk, rest[0]);
      return (end as (...a: unknown[]) => ServerResponse).call(this, chunk, ...rest);
    } as typeof res.end;

    res.once("finish", () => {
      const q = target.indexOf("?");
      this.exchanges.push({
        method: (req.method ?? "GET").toUpperCase(),
        path: q === -1 ? target : target.slice(0, q),
        requestContentType: req.headers["content-type"],
        requestBody: Buffer.concat(requestChunks),
        requestTruncated: requestBytes > MAX_RECORDED_BYTES,
        status: res.statusCode,
        responseHeaders: res.getHeaders(),
        responseBody: Buffer.concat(responseChunks),
        responseTruncated: responseBytes > MAX_RECORDED_BYTES,
      });
    });
  }

  private check(exchange: RecordedExchange): string | undefined {
    const template = this.match(exchange.path);
    const method = exchange.method.toLowerCase();
    if (!template) {
      if (exchange.status === 404) return this.problemBody(exchange, "no route (404)");
      // Authentication runs before routing under an authenticated prefix (`/v1/nothing` is a 401).
      if (exchange.status === 401) return this.problemBody(exchange, "no route, unauthenticated (401)");
      return "the path matches no route of the document";
    }
    const op = template.item[method] ?? (method === "head" ? template.item["get"] : undefined);
    if (!op) {
      if (exchange.status === 405) {
        if (exchange.responseHeaders["allow"] === undefined) return `route ${template.path}: 405 without an Allow header`;
        return this.problemBody(exchange, `route ${template.path}, method not allowed (405)`);
      }
      // The request guard refuses a malformed path or query before routing, whatever the method
      // (ALWAYS_PROBLEMS): a 400 problem of the catalogue, on an operation or not.
      if (exchange.status === 400) return this.refusedBeforeRouting(exchange, `route ${template.path}, ${method.toUpperCase()} refused before routing (400)`);
      return `route ${template.path} has no ${method} operation in the document`;
    }
    const where = `route ${method.toUpperCase()} ${template.path}`;
    const response = op.responses[String(exchange.status)] ?? op.responses[`${String(exchange.status)[0]}XX`] ?? op.responses["default"];
    if (!response) return `${where}: status ${exchange.status} is not documented (documented: ${Object.keys(op.responses).join(", ")})`;

    const responseProblem = this.checkResponse(exchange, response, method, where);
    if (responseProblem) return responseProblem;
    if (exchange.status >= 200 && exchange.status < 300) return this.checkRequest(exchange, op, where);
    return undefined;
  }

  private checkResponse(exchange: RecordedExchange, response: ResponseObject, method: string, where: string): string | undefined {
    const contentType = exchange.responseHeaders["content-type"] as string | undefined;
    const content = response.content;
    if (!content || Object.keys(content).length === 0) {
      if (exchange.responseBody.length > 0 && method !== "head") return `${where}: status ${exchange.status} is documented without a body, but one was sent (${contentType ?? "no type"})`;
      return undefined;
    }
    if (method === "head" || exchange.status === 304) return undefined;
    const media = mediaEntry(content, contentType);
    if (!media) return `${where}: media type ${contentType ?? "(none)"} is not documented for ${exchange.status} (documented: ${Object.keys(content).join(", ")})`;
    if (!media.schema || Object.keys(media.schema).length === 0 || exchange.responseTruncated || !isJsonType(contentType)) return undefined;
    const key = `${where} ${exchange.status} ${contentType}`;
    return this.validate(key, media.schema, exchange.responseBody, `${where}: the ${exchange.status} body`);
  }

  private checkRequest(exchange: RecordedExchange, op: OperationObject, where: string): string | undefined {
    const body = op.requestBody;
    if (!body?.content) return undefined;
    if (exchange.requestBody.length === 0) {
      return body.required && !exchange.requestTruncated ? `${where}: succeeded without the request body the document requires` : undefined;
    }
    if (exchange.requestTruncated || !isJsonType(exchange.requestContentType)) return undefined;
    const media = mediaEntry(body.content, exchange.requestContentType);
    if (!media) return `${where}: succeeded with request media type ${exchange.requestContentType ?? "(none)"}, which the document does not list`;
    // An empty schema takes any bytes (map-storage stores files as sent, whatever their type says).
    if (!media.schema || Object.keys(media.schema).length === 0) return undefined;
    return this.validate(`${where} request ${exchange.requestContentType}`, media.schema, exchange.requestBody, `${where}: the request body of a ${exchange.status}`);
  }

  /** A 400 outside any operation: only the guard's `invalid-path` or `invalid-parameter`. */
  private refusedBeforeRouting(exchange: RecordedExchange, what: string): string | undefined {
    const problem = this.problemBody(exchange, what);
    if (problem !== undefined) return problem;
    const type = (JSON.parse(exchange.responseBody.toString("utf8")) as { type?: unknown }).type;
    const allowed = (ALWAYS_PROBLEMS[400] ?? []).map((code) => `/problems/${code}`);
    return typeof type === "string" && allowed.some((t) => type.endsWith(t)) ? undefined : `${what}: problem type ${String(type)} is not one the guard answers (${allowed.join(", ")})`;
  }

  /** A 404 or 405 outside any operation must still be a problem document of the catalogue. */
  private problemBody(exchange: RecordedExchange, what: string): string | undefined {
    const contentType = exchange.responseHeaders["content-type"] as string | undefined;
    if (!/^application\/problem\+json/i.test(contentType ?? "")) return `${what}: answered ${contentType ?? "without a type"}, not application/problem+json`;
    return this.validate("problem", { $ref: "#/components/schemas/Problem" }, exchange.responseBody, what);
  }

  private validate(key: string, schema: JsonObject, body: Buffer, what: string): string | undefined {
    let data: unknown;
    try {
      data = JSON.parse(body.toString("utf8"));
    } catch {
      return `${what} is not JSON`;
    }
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.ajv.compile(rewriteRefs(schema) as JsonObject);
      this.compiled.set(key, validate);
    }
    if (validate(data)) return undefined;
    return `${what} does not match its schema: ${describeErrors(validate.errors ?? [])}`;
  }

  private template(path: string, item: Record<string, OperationObject>): Template {
    const multi = new Set<string>();
    for (const method of METHODS) {
      for (const parameter of item[method]?.parameters ?? []) {
        const resolved = this.resolveParameter(parameter);
        if (resolved?.["in"] === "path" && resolved["x-multi-segment"] === true) multi.add(String(resolved["name"]));
      }
    }
    let literals = 0;
    const source = path
      .split("/")
      .map((segment) => {
        const param = /^\{(.+)\}$/.exec(segment);
        if (param) return multi.has(param[1]!) ? "(.+)" : "([^/]+)";
        if (segment !== "") literals++;
        return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      })
      .join("/");
    return { path, regex: new RegExp(`^${source}$`), literals, item };
  }

  private resolveParameter(parameter: JsonObject): JsonObject | undefined {
    const ref = parameter["$ref"];
    if (typeof ref !== "string") return parameter;
    const name = ref.replace("#/components/parameters/", "");
    return ((this.document["components"] as JsonObject | undefined)?.["parameters"] as Record<string, JsonObject> | undefined)?.[name];
  }

  /** The most specific template (most literal segments) matching `path`. */
  private match(path: string): Template | undefined {
    let best: Template | undefined;
    for (const template of this.templates) {
      if (template.regex.test(path) && (!best || template.literals > best.literals)) best = template;
    }
    return best;
  }
}

function rewriteRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (typeof node !== "object" || node === null) return node;
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [k, k === "$ref" && typeof v === "string" ? v.replace("#/components/schemas/", COMPONENT_PREFIX) : rewriteRefs(v)]),
  );
}

function describeErrors(errors: ErrorObject[]): string {
  return errors
    .slice(0, 5)
    .map((e) => `${e.instancePath || "(root)"} ${e.message ?? e.keyword}${e.keyword === "enum" ? ` (${JSON.stringify(e.params["allowedValues"])})` : ""}${e.keyword === "additionalProperties" ? ` (${String(e.params["additionalProperty"])})` : ""}`)
    .join("; ");
}
