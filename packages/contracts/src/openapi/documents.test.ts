import { describe, expect, it } from "@jest/globals";
import { Validator } from "@seriousme/openapi-schema-validator";
import { createAjv } from "../validation.js";
import { PROBLEM_CODES, PROBLEM_TYPES } from "../problems.js";
import { buildAdminApiDocument } from "./admin-api.openapi.js";
import { buildEventIngestDocument } from "./event-ingest.openapi.js";
import { buildMapStorageDocument } from "./map-storage.openapi.js";
import type { JsonObject } from "./document-kit.js";

const DOCUMENTS: Record<string, () => JsonObject> = {
  "admin-api": () => buildAdminApiDocument({ serverUrl: "https://admin.example.test" }),
  "event-ingest": () => buildEventIngestDocument(),
  "map-storage": () => buildMapStorageDocument({ serverUrl: "https://maps.example.test" }),
};

type Operation = { security?: unknown[]; responses: Record<string, { content?: Record<string, { schema: { properties?: { type?: { enum?: string[] } } } }> }> };

function operations(doc: JsonObject): [string, string, Operation][] {
  const out: [string, string, Operation][] = [];
  for (const [path, item] of Object.entries(doc["paths"] as Record<string, Record<string, Operation>>)) {
    for (const [method, op] of Object.entries(item)) out.push([path, method, op]);
  }
  return out;
}

describe.each(Object.keys(DOCUMENTS))("the OpenAPI document of %s", (service) => {
  const build = DOCUMENTS[service]!;

  it("is a valid OpenAPI 3.1 document", async () => {
    const result = await new Validator().validate(build());
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
  });

  it("has component schemas that compile with the strict draft 2020-12 ajv the validators use", () => {
    const ajv = createAjv();
    const schemas = (build()["components"] as { schemas: Record<string, object> }).schemas;
    const rewrite = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(rewrite);
      if (typeof node !== "object" || node === null) return node;
      return Object.fromEntries(
        Object.entries(node).map(([k, v]) => [k, k === "$ref" && typeof v === "string" ? v.replace("#/components/schemas/", "urn:oas:") : rewrite(v)]),
      );
    };
    for (const [name, schema] of Object.entries(schemas)) ajv.addSchema({ ...(rewrite(schema) as object), $id: `urn:oas:${name}` });
    for (const name of Object.keys(schemas)) expect(ajv.getSchema(`urn:oas:${name}`)).toBeDefined();
  });

  it("gives every operation a security requirement, an answer for 500 and only catalogue problem types per status", () => {
    for (const [path, method, op] of operations(build())) {
      expect({ path, method, security: Array.isArray(op.security) }).toEqual({ path, method, security: true });
      expect(Object.keys(op.responses)).toContain("500");
      for (const [status, response] of Object.entries(op.responses)) {
        const types = response.content?.["application/problem+json"]?.schema.properties?.type?.enum;
        if (!types) continue;
        for (const type of types) {
          const code = type.replace("/problems/", "") as keyof typeof PROBLEM_TYPES;
          expect(PROBLEM_CODES).toContain(code);
          expect({ path, method, code, statuses: PROBLEM_TYPES[code].statuses }).toEqual({ path, method, code, statuses: expect.arrayContaining([Number(status)]) });
        }
      }
    }
  });
});

describe("the admin-api document", () => {
  it("keeps the webhooks section the dashboard's event catalogue reads", () => {
    const doc = buildAdminApiDocument();
    expect(Object.keys(doc["webhooks"] as object)).toContain("recording.completed");
  });
});
