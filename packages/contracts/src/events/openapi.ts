/**
 * The OpenAPI 3.1 document of the webhooks (spec: "Each payload is also described by an OpenAPI 3.1
 * document of JSON Schemas"): one `webhooks` entry per delivered type plus the legacy
 * `member.connecting` body, the schemas under `components.schemas`.
 *
 * The schemas are the ones the validators use, copied with `$id`/`$schema` removed and their
 * `$ref`s rewritten to `#/components/schemas/...`: inside a schema that keeps an `$id`, a `#/...`
 * reference would resolve against that `$id` instead of the document, and few OpenAPI tools
 * resolve references by `$id`. `jsonSchemaDialect` declares draft 2020-12 for all of them.
 */
import { CURRENT_API_VERSION, WEBHOOK_SUBSCRIPTIONS } from "../endpoints.schema.js";
import { ANALYTICS_EVENT_SCHEMA } from "./analytics.schema.js";
import { DELIVERY_SCHEMAS, ENVELOPE_SCHEMA } from "./envelope.schema.js";
import { DELIVERED_EVENT_TYPES, SCHEMA_DIALECT, SUBSCRIPTION_OF_TYPE, type DeliveredEventType } from "./event-types.js";
import { EVENT_DATA_SCHEMAS, LEGACY_AUTH_BODY_SCHEMA } from "./payloads.schema.js";
import { LEGACY_AUTH_SAMPLE, sampleDelivery } from "./samples.js";

/** Options of {@link buildOpenApiDocument}. */
export interface OpenApiDocumentOptions {
  /** Base address of the service's own routes (`servers[0].url`); omitted when not given. */
  serverUrl?: string;
}

/**
 * The OpenAPI 3.1 document: plain JSON-ready data. `paths` is there for routes added by other
 * modules. (A type alias, not an interface, so it is assignable to `Record<string, unknown>`.)
 */
export type OpenApiDocument = {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  jsonSchemaDialect: string;
  servers?: { url: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, unknown>>;
  webhooks: Record<string, { post: Record<string, unknown> }>;
  components: {
    schemas: Record<string, Record<string, unknown>>;
    parameters: Record<string, Record<string, unknown>>;
    responses: Record<string, Record<string, unknown>>;
  };
};

/** Webhook name of the legacy `member.connecting` body in the document. */
export const LEGACY_AUTH_WEBHOOK = "member.connecting.legacy";

function pascal(type: string): string {
  return type
    .split(/[._-]/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join("");
}

/** Component name of each schema, keyed by `$id`. */
function componentNames(): Map<string, string> {
  const names = new Map<string, string>([
    [ENVELOPE_SCHEMA.$id, "WebhookEnvelope"],
    [ANALYTICS_EVENT_SCHEMA.$id, "AnalyticsEvent"],
    [LEGACY_AUTH_BODY_SCHEMA.$id, "MemberConnectingLegacyBody"],
  ]);
  for (const type of DELIVERED_EVENT_TYPES) {
    names.set(EVENT_DATA_SCHEMAS[type].$id, `${pascal(type)}Data`);
    names.set(DELIVERY_SCHEMAS[type].$id, `${pascal(type)}Delivery`);
  }
  return names;
}

function toComponent(schema: object, names: ReadonlyMap<string, string>): Record<string, unknown> {
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (typeof node !== "object" || node === null) return node;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) {
      if (key === "$id" || key === "$schema") continue;
      if (key === "$ref" && typeof value === "string") {
        const name = names.get(value);
        // A reference left pointing at an `$id` would silently dangle in the document.
        if (!name) throw new Error(`no component for the schema ${value}`);
        out[key] = `#/components/schemas/${name}`;
        continue;
      }
      out[key] = rewrite(value);
    }
    return out;
  };
  return rewrite(schema) as Record<string, unknown>;
}

const ref = (kind: "schemas" | "parameters" | "responses", name: string) => ({ $ref: `#/components/${kind}/${name}` });

const SIGNATURE_TEXT =
  "`v1,` followed by the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed with the base64-decoded " +
  "part of the secret after `whsec_` (Standard Webhooks). It covers the raw bytes: a re-serialised body does not verify.";

const PARAMETERS = {
  WebhookId: {
    name: "webhook-id",
    in: "header",
    required: true,
    description: "Equals the body's `deliveryId`; the same on every retry and replay. Deduplicate on it.",
    schema: { type: "string" },
  },
  WebhookTimestamp: {
    name: "webhook-timestamp",
    in: "header",
    required: true,
    description: "Unix time in seconds of this attempt. Refuse a value more than 5 minutes away from your own clock.",
    schema: { type: "string", pattern: "^[0-9]+$" },
  },
  WebhookSignature: {
    name: "webhook-signature",
    in: "header",
    required: true,
    description: SIGNATURE_TEXT,
    schema: { type: "string", pattern: "^v1,[A-Za-z0-9+/]+={0,2}$" },
  },
  WebhookSignatureLegacy: {
    name: "webhook-signature",
    in: "header",
    required: false,
    description: `${SIGNATURE_TEXT} Absent only while a legacy-format endpoint has never had a secret; present from the moment one is generated.`,
    schema: { type: "string", pattern: "^v1,[A-Za-z0-9+/]+={0,2}$" },
  },
};

const RESPONSES = {
  Delivered: { description: "Delivered; done. The body is not read, but its first kilobytes are kept in the delivery log." },
  Retried: {
    description:
      "Retried, with the same deliveryId and body: up to 9 more attempts over about three days (after 5 s, 5 min, 30 min, 2, 5, " +
      "10, 14, 20 and 24 h, each up to 10% longer). Timeouts (15 s) and connection errors are handled the same way. After 50 " +
      "consecutive failed attempts the endpoint is disabled and administrators are emailed.",
  },
  Gone: { description: "Not retried; the endpoint is disabled at once (no more deliveries wanted)." },
  Rejected: {
    description:
      "Not retried: the request itself was judged wrong. A receiver that cannot verify the signature or timestamp answers 400.",
  },
  AuthAccepted: { description: "Accepted; the body is ignored. Answer within 5 seconds: the access check waits for it." },
  AuthFailed: {
    description:
      "Never retried and never blocks access: the member connects with the tags already held. Timeouts (5 s) and errors do not " +
      "count towards disabling the endpoint.",
  },
};

const ASYNC_RESPONSES = {
  "2XX": ref("responses", "Delivered"),
  "408": ref("responses", "Retried"),
  "410": ref("responses", "Gone"),
  "429": ref("responses", "Retried"),
  "4XX": ref("responses", "Rejected"),
  "5XX": ref("responses", "Retried"),
};

const AUTH_RESPONSES = {
  "2XX": ref("responses", "AuthAccepted"),
  "410": ref("responses", "Gone"),
  "4XX": ref("responses", "AuthFailed"),
  "5XX": ref("responses", "AuthFailed"),
};

const DESCRIPTIONS: Record<DeliveredEventType, { summary: string; description: string }> = {
  "recording.completed": {
    summary: "A meeting recording is ready",
    description:
      "One POST per recording; failed recordings produce none. `downloadUrl` is valid 7 days, retries and replays included " +
      "(a replay re-sends the original link, which may have expired).",
  },
  "visitor.registered": {
    summary: "A visitor account became usable",
    description:
      "At once for single sign-on, after email verification for the self-register form. Members invited by administrators are not visitors.",
  },
  "consent.changed": {
    summary: "A consent decision was recorded",
    description:
      "One POST per decision per purpose; restating an unchanged decision sends nothing. Deliveries are not ordered: keep the " +
      "one with the latest `timestamp` for a person and purpose.",
  },
  "analytics.batch": {
    summary: "Usage events of the world (experimental)",
    description:
      "At most 100 inner events per POST and a few POSTs per minute. Names and properties may change without a new apiVersion; " +
      "match on families and ignore the rest.",
  },
  "member.connecting": {
    summary: "A member is being authenticated",
    description:
      "Synchronous: the access check waits up to 5 seconds, during which the receiver may change the member's tags through the " +
      "Inbound API. Sent on every connection, visitors included, to every endpoint subscribed to `auth`, one after another; upsert on `uuid`.",
  },
  ping: {
    summary: "Test ping",
    description: "Sent only by the dashboard Test action, with `test: true` and `data` `{}`.",
  },
};

function operation(type: DeliveredEventType): Record<string, unknown> {
  const isAuth = type === "member.connecting";
  return {
    operationId: `webhook.${type}`,
    tags: [SUBSCRIPTION_OF_TYPE[type] ?? "test"],
    ...DESCRIPTIONS[type],
    parameters: [ref("parameters", "WebhookId"), ref("parameters", "WebhookTimestamp"), ref("parameters", "WebhookSignature")],
    requestBody: {
      required: true,
      content: {
        "application/json": {
          schema: ref("schemas", `${pascal(type)}Delivery`),
          examples: { sample: { summary: `Sample ${type} delivery`, value: sampleDelivery(type) } },
        },
      },
    },
    responses: structuredClone(isAuth ? AUTH_RESPONSES : ASYNC_RESPONSES),
  };
}

function legacyOperation(): Record<string, unknown> {
  return {
    operationId: `webhook.${LEGACY_AUTH_WEBHOOK}`,
    tags: ["auth"],
    summary: "A member is being authenticated (legacy body)",
    description:
      "Sent instead of `member.connecting` to legacy-format endpoints: a flat body with no envelope, so no deliveryId, world or " +
      "test marker (a Test looks like a real hook with a sample member); the webhook-id header is still sent.",
    parameters: [ref("parameters", "WebhookId"), ref("parameters", "WebhookTimestamp"), ref("parameters", "WebhookSignatureLegacy")],
    requestBody: {
      required: true,
      content: {
        "application/json": {
          schema: ref("schemas", "MemberConnectingLegacyBody"),
          examples: { sample: { summary: "Sample legacy member.connecting body", value: structuredClone(LEGACY_AUTH_SAMPLE) } },
        },
      },
    },
    responses: structuredClone(AUTH_RESPONSES),
  };
}

/**
 * Builds the OpenAPI 3.1 document of the webhooks: a fresh object on every call, so callers may add
 * `paths` or change it. Every webhook example is a sample delivery that passes its schema.
 */
export function buildOpenApiDocument(options: OpenApiDocumentOptions = {}): OpenApiDocument {
  const names = componentNames();
  const schemas: Record<string, Record<string, unknown>> = {};
  const sources: object[] = [ENVELOPE_SCHEMA, ANALYTICS_EVENT_SCHEMA, LEGACY_AUTH_BODY_SCHEMA];
  for (const type of DELIVERED_EVENT_TYPES) sources.push(EVENT_DATA_SCHEMAS[type], DELIVERY_SCHEMAS[type]);
  for (const schema of sources) {
    const id = (schema as { $id: string }).$id;
    schemas[names.get(id) ?? id] = toComponent(schema, names);
  }

  const webhooks: OpenApiDocument["webhooks"] = {};
  for (const type of DELIVERED_EVENT_TYPES) webhooks[type] = { post: operation(type) };
  webhooks[LEGACY_AUTH_WEBHOOK] = { post: legacyOperation() };

  return {
    openapi: "3.1.0",
    info: {
      title: "Virtual-world webhooks",
      version: CURRENT_API_VERSION,
      description:
        "Events POSTed to the endpoints of a world, signed (Standard Webhooks) and delivered at least once, unordered: " +
        "deduplicate on deliveryId, ignore types you do not know. Answer any 2xx within 15 seconds (5 for member.connecting).",
    },
    jsonSchemaDialect: SCHEMA_DIALECT,
    ...(options.serverUrl === undefined ? {} : { servers: [{ url: options.serverUrl }] }),
    tags: [
      ...WEBHOOK_SUBSCRIPTIONS.map((name) => ({ name, description: `Deliveries of the \`${name}\` subscription.` })),
      { name: "test", description: "Sent by the dashboard Test action only." },
    ],
    paths: {},
    webhooks,
    components: { schemas, parameters: structuredClone(PARAMETERS), responses: structuredClone(RESPONSES) },
  };
}
