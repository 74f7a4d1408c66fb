import { describe, expect, it } from "@jest/globals";
import { Validator } from "@seriousme/openapi-schema-validator";
import { createAjv } from "../validation.js";
import { DELIVERED_EVENT_TYPES } from "./event-types.js";
import { LEGACY_AUTH_WEBHOOK, buildOpenApiDocument, type OpenApiDocument } from "./openapi.js";
import { EVENT_SAMPLES } from "./samples.js";

interface MediaType {
  schema: { $ref: string };
  examples: Record<string, { value: unknown }>;
}

function bodyOf(doc: OpenApiDocument, webhook: string): MediaType {
  const post = doc.webhooks[webhook]?.post as { requestBody: { content: Record<string, MediaType> } } | undefined;
  const media = post?.requestBody.content["application/json"];
  if (!media) throw new Error(`no application/json body for ${webhook}`);
  return media;
}

/**
 * Compiles the document's component schemas with a strict draft 2020-12 ajv: each becomes a
 * resource `urn:oas:<name>` and `#/components/schemas/<name>` references point there.
 */
function componentValidator(doc: OpenApiDocument) {
  const ajv = createAjv();
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (typeof node !== "object" || node === null) return node;
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [k, k === "$ref" && typeof v === "string" ? v.replace("#/components/schemas/", "urn:oas:") : rewrite(v)]),
    );
  };
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    ajv.addSchema({ ...(rewrite(schema) as object), $id: `urn:oas:${name}` });
  }
  return (ref: string, value: unknown) => {
    const validate = ajv.getSchema(ref.replace("#/components/schemas/", "urn:oas:"));
    if (!validate) throw new Error(`no schema ${ref}`);
    return { valid: validate(value), errors: validate.errors };
  };
}

describe("buildOpenApiDocument", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    const result = await new Validator().validate(buildOpenApiDocument({ serverUrl: "https://api.vw.dev" }));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
  });

  it("is refused by the same validator once broken (the check above can fail)", async () => {
    const badParameter = buildOpenApiDocument();
    badParameter.components.parameters["WebhookId"] = { name: "webhook-id", in: "headers", schema: { type: "string" } };
    expect((await new Validator().validate(badParameter)).valid).toBe(false);
    const dangling = buildOpenApiDocument();
    delete dangling.components.schemas["AnalyticsEvent"];
    expect((await new Validator().validate(dangling)).valid).toBe(false);
  });

  it("declares 3.1.0, the 2020-12 dialect, empty paths and the server only when given", () => {
    const doc = buildOpenApiDocument();
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.jsonSchemaDialect).toBe("https://json-schema.org/draft/2020-12/schema");
    expect(doc.paths).toEqual({});
    expect(doc).not.toHaveProperty("servers");
    expect(buildOpenApiDocument({ serverUrl: "https://api.vw.dev" }).servers).toEqual([{ url: "https://api.vw.dev" }]);
  });

  it("has one webhook per delivered type plus the legacy member.connecting body", () => {
    expect(Object.keys(buildOpenApiDocument().webhooks).sort()).toEqual([...DELIVERED_EVENT_TYPES, LEGACY_AUTH_WEBHOOK].sort());
  });

  it("references component schemas only, with no $id left to shift their base", () => {
    const doc = buildOpenApiDocument();
    const text = JSON.stringify(doc);
    expect(text).not.toContain('"$id"');
    for (const [, target] of text.matchAll(/"\$ref":"([^"]+)"/g)) {
      expect(target).toMatch(/^#\/components\/(schemas|parameters|responses)\/[A-Za-z]+$/);
    }
    expect(bodyOf(doc, "recording.completed").schema).toEqual({ $ref: "#/components/schemas/RecordingCompletedDelivery" });
    expect(doc.components.schemas["RecordingCompletedDelivery"]).toMatchObject({
      allOf: [{ $ref: "#/components/schemas/WebhookEnvelope" }],
      properties: { type: { const: "recording.completed" }, data: { $ref: "#/components/schemas/RecordingCompletedData" } },
    });
  });

  it("validates every example against its schema", () => {
    const doc = buildOpenApiDocument();
    const check = componentValidator(doc);
    let examples = 0;
    for (const webhook of Object.keys(doc.webhooks)) {
      const media = bodyOf(doc, webhook);
      for (const example of Object.values(media.examples)) {
        expect({ webhook, ...check(media.schema.$ref, example.value) }).toEqual({ webhook, valid: true, errors: null });
        examples += 1;
      }
    }
    expect(examples).toBe(DELIVERED_EVENT_TYPES.length + 1);
  });

  it("uses the samples as examples, and its component schemas still refuse bad bodies", () => {
    const doc = buildOpenApiDocument();
    const check = componentValidator(doc);
    const example = bodyOf(doc, "analytics.batch").examples["sample"]?.value as { data: unknown };
    expect(example.data).toEqual(EVENT_SAMPLES["analytics.batch"]);
    const tooMany = { ...example, data: { events: Array.from({ length: 101 }, () => EVENT_SAMPLES["analytics.batch"].events[0]) } };
    expect(check("#/components/schemas/AnalyticsBatchDelivery", tooMany).valid).toBe(false);
    const pingWithData = { ...(bodyOf(doc, "ping").examples["sample"]?.value as object), data: { x: 1 } };
    expect(check("#/components/schemas/PingDelivery", pingWithData).valid).toBe(false);
  });

  it("describes the signature headers and the receiver answers", () => {
    const doc = buildOpenApiDocument();
    const names = Object.values(doc.components.parameters).map((p) => p["name"]);
    expect(new Set(names)).toEqual(new Set(["webhook-id", "webhook-timestamp", "webhook-signature"]));
    expect(doc.components.parameters["WebhookSignatureLegacy"]?.["required"]).toBe(false);
    const responses = (webhook: string) => (doc.webhooks[webhook]?.post as { responses: Record<string, unknown> }).responses;
    expect(Object.keys(responses("recording.completed")).sort()).toEqual(["2XX", "408", "410", "429", "4XX", "5XX"]);
    expect(responses("recording.completed")["410"]).toEqual({ $ref: "#/components/responses/Gone" });
    expect(responses("recording.completed")["5XX"]).toEqual({ $ref: "#/components/responses/Retried" });
    expect(responses("member.connecting")["5XX"]).toEqual({ $ref: "#/components/responses/AuthFailed" });
  });

  it("returns a fresh document on every call", () => {
    const a = buildOpenApiDocument();
    a.paths["/admin/v1/x"] = { get: {} };
    (a.components.schemas["PingData"] as Record<string, unknown>)["title"] = "changed";
    const b = buildOpenApiDocument();
    expect(b.paths).toEqual({});
    expect(b.components.schemas["PingData"]?.["title"]).toBe("ping data");
  });
});
