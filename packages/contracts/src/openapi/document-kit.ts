/**
 * Small builders shared by the OpenAPI documents of the services: component schemas taken from the
 * validators' own JSON Schemas (by `$id`), problem answers restricted to the catalogue's codes, and
 * operations whose error answers are merged from per-service defaults.
 */
import { PROBLEM_SCHEMA, PROBLEM_TYPES, problemTypeUri, type ProblemCode } from "../problems.js";

/** A JSON object of the document. */
export type JsonObject = Record<string, unknown>;

/** The problem codes an operation can answer, by HTTP status. */
export type ProblemMap = Partial<Record<number, readonly ProblemCode[]>>;

/** `{ $ref: "#/components/schemas/<name>" }` */
export const schemaRef = (name: string): JsonObject => ({ $ref: `#/components/schemas/${name}` });

/** `{ $ref: "#/components/parameters/<name>" }` */
export const parameterRef = (name: string): JsonObject => ({ $ref: `#/components/parameters/${name}` });

/** Name of the problem document's component schema. */
export const PROBLEM_COMPONENT = "Problem";

/**
 * The `components.schemas` of a document. Schemas are added as the validators compile them; their
 * `$id`/`$schema` are dropped and every `$ref` to an `$id` is rewritten to the component's
 * `#/components/schemas/...` address (a `#/...` reference inside a schema that kept its `$id` would
 * resolve against that `$id`, and few OpenAPI tools resolve references by `$id`).
 */
export class ComponentSchemas {
  private readonly entries = new Map<string, object>();
  private readonly names = new Map<string, string>();

  /** Adds `schema` as component `name`; returns a reference to it. */
  add(name: string, schema: object): JsonObject {
    if (this.entries.has(name)) throw new Error(`component schema ${name} added twice`);
    this.entries.set(name, schema);
    const id = (schema as { $id?: unknown }).$id;
    if (typeof id === "string") this.names.set(id, name);
    return schemaRef(name);
  }

  /** The components, references resolved; throws on a reference to a schema never added. */
  build(): Record<string, JsonObject> {
    const out: Record<string, JsonObject> = {};
    for (const [name, schema] of this.entries) out[name] = this.rewrite(schema) as JsonObject;
    return out;
  }

  private rewrite(node: unknown): unknown {
    if (Array.isArray(node)) return node.map((item) => this.rewrite(item));
    if (typeof node !== "object" || node === null) return node;
    const out: JsonObject = {};
    for (const [key, value] of Object.entries(node)) {
      if (key === "$id" || key === "$schema") continue;
      if (key === "$ref" && typeof value === "string" && !value.startsWith("#/components/")) {
        const name = this.names.get(value);
        // A reference left pointing at an `$id` would silently dangle in the document.
        if (!name) throw new Error(`no component for the schema ${value}`);
        out[key] = `#/components/schemas/${name}`;
        continue;
      }
      out[key] = this.rewrite(value);
    }
    return out;
  }
}

/** Unions problem maps status by status (codes deduplicated, first-seen order). */
export function mergeProblems(...maps: ProblemMap[]): ProblemMap {
  const out: Partial<Record<number, ProblemCode[]>> = {};
  for (const map of maps) {
    for (const [status, codes] of Object.entries(map)) {
      const list = (out[Number(status)] ??= []);
      for (const code of codes ?? []) if (!list.includes(code)) list.push(code);
    }
  }
  return out;
}

const PROBLEM_HEADERS: Partial<Record<number, JsonObject>> = {
  401: { "WWW-Authenticate": { description: "`Bearer realm=\"<service>\"`, with `error=` when a token was sent (RFC 6750).", schema: { type: "string" } } },
  405: { Allow: { description: "The methods this path takes.", schema: { type: "string" } } },
  429: { "Retry-After": { description: "Seconds until this client's credentials are accepted again.", schema: { type: "string" } } },
  503: { "Retry-After": { description: "Seconds to wait before retrying.", schema: { type: "string" } } },
};

/** The answer of `status` with one of `codes`: a problem document whose `type` is one of them. */
export function problemResponse(status: number, codes: readonly ProblemCode[]): JsonObject {
  for (const code of codes) {
    if (!(PROBLEM_TYPES[code].statuses as readonly number[]).includes(status)) {
      throw new Error(`problem type ${code} is not answered with ${status}`);
    }
  }
  const headers = PROBLEM_HEADERS[status];
  return {
    description: codes.map((code) => `\`${code}\`: ${PROBLEM_TYPES[code].summary}`).join("\n\n"),
    ...(headers ? { headers } : {}),
    content: {
      "application/problem+json": {
        schema: {
          allOf: [schemaRef(PROBLEM_COMPONENT)],
          type: "object",
          properties: { type: { enum: codes.map(problemTypeUri) }, status: { const: status } },
        },
      },
    },
  };
}

/** A JSON answer. */
export function jsonResponse(description: string, schema: JsonObject, headers?: JsonObject): JsonObject {
  return { description, ...(headers ? { headers } : {}), content: { "application/json": { schema } } };
}

/** An answer without a body. */
export function emptyResponse(description: string, headers?: JsonObject): JsonObject {
  return { description, ...(headers ? { headers } : {}) };
}

/**
 * A JSON request body; `mergePatch` also lists `application/merge-patch+json` (RFC 7396), which a
 * PATCH whose members replace the stored ones is.
 */
export function jsonRequestBody(schema: JsonObject, options: { required?: boolean; description?: string; mergePatch?: boolean } = {}): JsonObject {
  return {
    required: options.required ?? true,
    ...(options.description ? { description: options.description } : {}),
    content: { "application/json": { schema }, ...(options.mergePatch ? { "application/merge-patch+json": { schema } } : {}) },
  };
}

/** What {@link operation} builds an operation from. */
export interface OperationSpec {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** Name of the security scheme required; `null` for a public route. */
  security: string | null;
  parameters?: JsonObject[];
  requestBody?: JsonObject;
  /** The answers that are not problems (2xx, 3xx). */
  responses: Record<string, JsonObject>;
  /** The problems this operation can answer, besides the defaults the caller merges in. */
  problems?: ProblemMap;
}

/** An OpenAPI operation object: its answers, then one problem answer per status of `problems`. */
export function operation(spec: OperationSpec, defaults: ProblemMap): JsonObject {
  const problems = mergeProblems(defaults, spec.problems ?? {});
  const responses: Record<string, JsonObject> = { ...spec.responses };
  for (const status of Object.keys(problems).map(Number).sort((a, b) => a - b)) {
    const codes = problems[status];
    if (codes && codes.length > 0) responses[String(status)] = problemResponse(status, codes);
  }
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: spec.tags,
    security: spec.security === null ? [] : [{ [spec.security]: [] }],
    ...(spec.parameters ? { parameters: spec.parameters } : {}),
    ...(spec.requestBody ? { requestBody: spec.requestBody } : {}),
    responses,
  };
}

/** Adds the problem schema every document references. */
export function addProblemSchema(components: ComponentSchemas): void {
  components.add(PROBLEM_COMPONENT, PROBLEM_SCHEMA);
}

/** A path parameter. */
export function pathParameter(name: string, description: string, schema: JsonObject = { type: "string" }): JsonObject {
  return { name, in: "path", required: true, description, schema };
}

/** `limit` and `cursor` of a list (the admin API's pagination). */
export const PAGE_PARAMETERS: Record<string, JsonObject> = {
  Limit: {
    name: "limit",
    in: "query",
    required: false,
    description: "Page size, 1-100 (50 by default).",
    schema: { type: "integer", minimum: 1, maximum: 100, default: 50 },
  },
  Cursor: {
    name: "cursor",
    in: "query",
    required: false,
    description: "The `nextCursor` of the previous page, as given (an opaque token).",
    schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,512}$" },
  },
};

/** A page of `item`: `{items, nextCursor}`. */
export function pageSchema(title: string, item: JsonObject): JsonObject {
  return {
    title,
    type: "object",
    additionalProperties: false,
    required: ["items", "nextCursor"],
    properties: {
      items: { type: "array", items: item },
      nextCursor: { type: ["string", "null"], description: "Pass as `cursor` for the next page; null on the last page." },
    },
  };
}
