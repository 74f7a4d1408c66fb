/**
 * The OpenAPI 3.1 document event-ingest serves at `GET /openapi.json`: the intake routes (`/v1`),
 * the synchronous auth hook and the service routes. The request schemas are the ones the
 * validators compile, the event payloads the event catalogue's.
 */
import { CURRENT_API_VERSION } from "../endpoints.schema.js";
import { ANALYTICS_EVENT_SCHEMA } from "../events/analytics.schema.js";
import { EVENT_TYPES, SCHEMA_DIALECT } from "../events/event-types.js";
import { EVENT_DATA_SCHEMAS } from "../events/payloads.schema.js";
import {
  ANALYTICS_INTAKE_RESULT_SCHEMA,
  AUTH_HOOK_REQUEST_SCHEMA,
  AUTH_HOOK_RESPONSE_SCHEMA,
  INGEST_RESULT_SCHEMA,
  INTAKE_EVENT_SHAPE_SCHEMA,
  WORLD_REFERENCE_PATTERN,
} from "../ingest.schema.js";
import {
  ComponentSchemas,
  addProblemSchema,
  jsonRequestBody,
  jsonResponse,
  mergeProblems,
  operation,
  schemaRef,
  type JsonObject,
  type OperationSpec,
  type ProblemMap,
} from "./document-kit.js";
import { ALWAYS_PROBLEMS, OPERATIONS_TAG, serviceRoutes } from "./service-routes.js";
import { memberComponents, memberIntakePaths } from "./members.openapi.js";

/** Security scheme of `Authorization: Bearer <INGEST_TOKEN>`. */
export const INGEST_TOKEN_SCHEME = "ingestToken";

/** Problems of every authenticated intake route (all of them read a JSON body). */
export const INGEST_PROBLEMS: ProblemMap = mergeProblems(ALWAYS_PROBLEMS, {
  400: ["invalid-request", "malformed-json", "too-deeply-nested", "bad-request"],
  401: ["missing-token", "invalid-token"],
  413: ["payload-too-large"],
  429: ["too-many-failed-attempts"],
  415: ["unsupported-media-type", "unsupported-encoding"],
  503: ["dependency-unavailable"],
});

const pascal = (type: string) =>
  type
    .split(/[._-]/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join("");

/** An authenticated intake operation. */
function ingestOperation(spec: Omit<OperationSpec, "security">): JsonObject {
  return operation({ ...spec, security: INGEST_TOKEN_SCHEME }, INGEST_PROBLEMS);
}

function ingestComponents(components: ComponentSchemas): void {
  addProblemSchema(components);
  components.add("EventShape", INTAKE_EVENT_SHAPE_SCHEMA);
  for (const type of EVENT_TYPES) components.add(`${pascal(type)}Data`, EVENT_DATA_SCHEMAS[type]);
  // The shape the validator compiles, narrowed for readers: the type is one of the intake types and
  // `data` follows that type's schema (the validator checks both, with its own messages).
  components.add("IntakeEvent", {
    title: "Intake event",
    allOf: [
      schemaRef("EventShape"),
      {
        type: "object",
        properties: { world: { type: "string", pattern: WORLD_REFERENCE_PATTERN }, type: { enum: [...EVENT_TYPES] } },
      },
      ...EVENT_TYPES.map((type) => ({
        if: { type: "object", properties: { type: { const: type } }, required: ["type"] },
        then: { type: "object", properties: { data: schemaRef(`${pascal(type)}Data`) } },
      })),
    ],
  });
  components.add("IntakeRequest", {
    title: "One event, or a batch",
    oneOf: [
      schemaRef("IntakeEvent"),
      {
        type: "object",
        additionalProperties: false,
        required: ["events"],
        properties: { events: { type: "array", minItems: 1, items: schemaRef("IntakeEvent"), description: "At most MAX_EVENTS_PER_REQUEST (500)." } },
      },
    ],
  });
  components.add("AnalyticsEvent", ANALYTICS_EVENT_SCHEMA);
  components.add("AnalyticsIntakeRequest", {
    title: "Analytics events of one world",
    type: "object",
    additionalProperties: false,
    required: ["world", "events"],
    properties: {
      world: { type: "string", pattern: WORLD_REFERENCE_PATTERN, description: "`<organization>/<world>`." },
      events: { type: "array", minItems: 1, items: schemaRef("AnalyticsEvent"), description: "At most MAX_EVENTS_PER_REQUEST (500)." },
    },
  });
  components.add("IngestResult", INGEST_RESULT_SCHEMA);
  components.add("AnalyticsIntakeResult", ANALYTICS_INTAKE_RESULT_SCHEMA);
  components.add("AuthHookRequest", AUTH_HOOK_REQUEST_SCHEMA);
  components.add("AuthHookResponse", AUTH_HOOK_RESPONSE_SCHEMA);
}

function ingestPaths(): Record<string, Record<string, JsonObject>> {
  return {
    "/v1/events": {
      post: ingestOperation({
        operationId: "ingestEvents",
        summary: "Submit domain events",
        description:
          "Validated as a whole (nothing is accepted when anything is invalid), deduplicated on `id` within the world, and fanned " +
          "out to the world's enabled endpoints subscribed to each type's subscription. Retrying the same request is safe.",
        tags: ["intake"],
        requestBody: jsonRequestBody(schemaRef("IntakeRequest")),
        responses: { "202": jsonResponse("Accepted (or already known).", schemaRef("IngestResult")) },
        problems: { 404: ["unknown-world"] },
      }),
    },
    "/v1/analytics": {
      post: ingestOperation({
        operationId: "ingestAnalytics",
        summary: "Submit analytics events of a world",
        description:
          "The world's privacy settings apply, then the events are batched per endpoint into `analytics.batch` deliveries. An inner event " +
          "larger than ANALYTICS_EVENT_MAX_BYTES (its JSON; 16 KiB by default) is refused with 413 `payload-too-large`, `errors[]` naming " +
          "each such event (`/events/<index>`, with its `id`), and nothing is accepted. Events past the world's buffer (in events, " +
          "ANALYTICS_BUFFER_MAX_PER_WORLD, or in bytes, ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD) are not buffered, and counted.",
        tags: ["intake"],
        requestBody: jsonRequestBody(schemaRef("AnalyticsIntakeRequest")),
        responses: { "202": jsonResponse("Accepted (or dropped by the world's settings).", schemaRef("AnalyticsIntakeResult")) },
        problems: { 404: ["unknown-world"] },
      }),
    },
    "/v1/auth-hook": {
      post: ingestOperation({
        operationId: "authHook",
        summary: "A member is connecting: call the world's `auth` endpoints",
        description:
          "`member.connecting` is POSTed to every enabled `auth` endpoint, one after another, never retried and never counted " +
          "towards disabling. The answer comes within AUTH_HOOK_TIMEOUT_MS in total, whatever the number of endpoints: each call " +
          "gets what is left of that budget, and endpoints not reached in time are listed with `error: \"not-reached\"` and called " +
          "after the answer, in the background (one at a time per world, each with its own AUTH_HOOK_TIMEOUT_MS), their results " +
          "recorded in the delivery history. The answer reports each endpoint, whatever the receivers did.",
        tags: ["auth-hook"],
        requestBody: jsonRequestBody(schemaRef("AuthHookRequest")),
        responses: { "200": jsonResponse("Every endpoint was called, or is listed as not reached in time.", schemaRef("AuthHookResponse")) },
        problems: { 404: ["unknown-world"] },
      }),
    },
  };
}

/** Options of {@link buildEventIngestDocument}. */
export interface EventIngestDocumentOptions {
  /** Base address of event-ingest (`servers[0].url`); omitted when not given. */
  serverUrl?: string;
}

/** Builds event-ingest's OpenAPI 3.1 document: a fresh object on every call. */
export function buildEventIngestDocument(options: EventIngestDocumentOptions = {}): JsonObject {
  const components = new ComponentSchemas();
  const paths: Record<string, Record<string, JsonObject>> = { ...serviceRoutes("ingest", components) };
  ingestComponents(components);
  Object.assign(paths, ingestPaths());
  memberComponents(components, { intake: true });
  Object.assign(paths, memberIntakePaths(ingestOperation));
  return {
    openapi: "3.1.0",
    info: {
      title: "Virtual-world event intake",
      version: CURRENT_API_VERSION,
      description:
        "Platform-internal: the platform submits domain events, analytics events and the synchronous member.connecting hook. " +
        "Every error is an RFC 9457 problem document whose `type` is in the catalogue of problem types.",
    },
    jsonSchemaDialect: SCHEMA_DIALECT,
    ...(options.serverUrl === undefined ? {} : { servers: [{ url: options.serverUrl }] }),
    tags: [
      OPERATIONS_TAG,
      { name: "intake", description: "Domain and analytics events." },
      { name: "auth-hook", description: "The synchronous member.connecting hook." },
      { name: "members", description: "The member directory's intake (the Inbound API's member records)." },
    ],
    paths,
    components: {
      schemas: components.build(),
      securitySchemes: {
        [INGEST_TOKEN_SCHEME]: { type: "http", scheme: "bearer", description: "`Authorization: Bearer <INGEST_TOKEN>`." },
      },
    },
  };
}
