/**
 * The OpenAPI 3.1 document admin-api serves at `GET /openapi.json`: every route of the admin API
 * (`/admin/v1`), the service routes, and the `webhooks` section of the delivered events (which the
 * dashboard's event catalogue reads). Request and answer schemas are the validators' own.
 */
import {
  API_KEY_SCHEMA,
  CREATE_API_KEY_REQUEST_SCHEMA,
  CREATE_ORGANIZATION_REQUEST_SCHEMA,
  CREATE_WORLD_REQUEST_SCHEMA,
  CREATED_API_KEY_SCHEMA,
  ORGANIZATION_SCHEMA,
  SLUG_PATTERN,
  UPDATE_WORLD_REQUEST_SCHEMA,
  WORLD_SCHEMA,
} from "../admin.schema.js";
import {
  ATTEMPT_SCHEMA,
  DELIVERY_SCHEMA,
  DELIVERY_STATUSES,
  DELIVERY_SUMMARY_SCHEMA,
  TEST_DELIVERY_REQUEST_SCHEMA,
  TEST_DELIVERY_SCHEMA,
} from "../deliveries.schema.js";
import {
  CREATE_ENDPOINT_REQUEST_SCHEMA,
  ENDPOINT_SCHEMA,
  ENDPOINT_WITH_SECRET_SCHEMA,
  IMPORT_LEGACY_ENDPOINT_REQUEST_SCHEMA,
  SET_ENDPOINT_FORMAT_REQUEST_SCHEMA,
  UPDATE_ENDPOINT_REQUEST_SCHEMA,
} from "../endpoints.schema.js";
import { buildOpenApiDocument } from "../events/openapi.js";
import {
  ComponentSchemas,
  PAGE_PARAMETERS,
  addProblemSchema,
  emptyResponse,
  jsonRequestBody,
  jsonResponse,
  mergeProblems,
  operation,
  pageSchema,
  parameterRef,
  pathParameter,
  schemaRef,
  type JsonObject,
  type OperationSpec,
  type ProblemMap,
} from "./document-kit.js";
import { ALWAYS_PROBLEMS, OPERATIONS_TAG, serviceRoutes } from "./service-routes.js";

/** The admin API's prefix. */
export const ADMIN_API_BASE_PATH = "/admin/v1";

/** Security scheme of `Authorization: Bearer <ADMIN_TOKEN>`. */
export const ADMIN_TOKEN_SCHEME = "adminToken";

/** Problems of every authenticated admin route. */
export const ADMIN_PROBLEMS: ProblemMap = mergeProblems(ALWAYS_PROBLEMS, {
  401: ["missing-token", "invalid-token"],
  503: ["dependency-unavailable"],
});

/** Problems of every admin route that reads a JSON body. */
export const ADMIN_BODY_PROBLEMS: ProblemMap = {
  400: ["invalid-request", "malformed-json", "bad-request"],
  413: ["payload-too-large"],
  415: ["unsupported-media-type", "unsupported-encoding"],
};

const LIST_PROBLEMS: ProblemMap = { 400: ["invalid-parameter"] };
const NOT_FOUND: ProblemMap = { 404: ["not-found"] };

const TAGS = [
  { name: "organizations", description: "Organizations and their worlds." },
  { name: "worlds", description: "A world's settings and its map-storage API keys." },
  { name: "endpoints", description: "Webhook endpoints of a world and the actions on them." },
  { name: "deliveries", description: "Test, delivery history and Replay." },
];

/** An authenticated admin operation: the admin problems merged in, plus the body ones when it has a body. */
function adminOperation(spec: Omit<OperationSpec, "security">): JsonObject {
  const defaults = spec.requestBody ? mergeProblems(ADMIN_PROBLEMS, ADMIN_BODY_PROBLEMS) : ADMIN_PROBLEMS;
  return operation({ ...spec, security: ADMIN_TOKEN_SCHEME }, defaults);
}

const locationHeader = (what: string): JsonObject => ({ Location: { description: `Path of the ${what}.`, schema: { type: "string" } } });
const noStore: JsonObject = { "Cache-Control": { description: "`no-store`: the answer carries a secret.", schema: { type: "string" } } };

/** The routes of `/admin/v1`, keyed by path relative to the prefix. */
function adminPaths(): Record<string, Record<string, JsonObject>> {
  const org = [parameterRef("Organization")];
  const world = [parameterRef("Organization"), parameterRef("World")];
  const endpoint = [...world, parameterRef("EndpointId")];
  const delivery = [...endpoint, parameterRef("DeliveryId")];
  const page = [parameterRef("Limit"), parameterRef("Cursor")];
  const json = (name: string, description: string) => jsonResponse(description, schemaRef(name));

  return {
    "/organizations": {
      get: adminOperation({
        operationId: "listOrganizations",
        summary: "List organizations",
        tags: ["organizations"],
        parameters: page,
        responses: { "200": json("OrganizationPage", "A page of organizations, oldest first.") },
        problems: LIST_PROBLEMS,
      }),
      post: adminOperation({
        operationId: "createOrganization",
        summary: "Create an organization",
        tags: ["organizations"],
        requestBody: jsonRequestBody(schemaRef("CreateOrganizationRequest")),
        responses: { "201": jsonResponse("Created.", schemaRef("Organization"), locationHeader("organization")) },
        problems: { 409: ["organization-exists"] },
      }),
    },
    "/organizations/{org}": {
      get: adminOperation({
        operationId: "getOrganization",
        summary: "Read an organization",
        tags: ["organizations"],
        parameters: org,
        responses: { "200": json("Organization", "The organization.") },
        problems: NOT_FOUND,
      }),
    },
    "/organizations/{org}/worlds": {
      get: adminOperation({
        operationId: "listWorlds",
        summary: "List an organization's worlds",
        tags: ["organizations"],
        parameters: [...org, ...page],
        responses: { "200": json("WorldPage", "A page of worlds, oldest first.") },
        problems: mergeProblems(LIST_PROBLEMS, NOT_FOUND),
      }),
      post: adminOperation({
        operationId: "createWorld",
        summary: "Create a world",
        tags: ["organizations"],
        parameters: org,
        requestBody: jsonRequestBody(schemaRef("CreateWorldRequest")),
        responses: { "201": jsonResponse("Created.", schemaRef("World"), locationHeader("world")) },
        problems: { 404: ["not-found"], 409: ["world-exists", "custom-domain-taken"] },
      }),
    },
    "/worlds/{org}/{world}": {
      get: adminOperation({
        operationId: "getWorld",
        summary: "Read a world's settings",
        tags: ["worlds"],
        parameters: world,
        responses: { "200": json("World", "The world and its settings.") },
        problems: NOT_FOUND,
      }),
      patch: adminOperation({
        operationId: "updateWorld",
        summary: "Change a world's settings",
        tags: ["worlds"],
        parameters: world,
        requestBody: jsonRequestBody(schemaRef("UpdateWorldRequest"), { mergePatch: true }),
        responses: { "200": json("World", "The world as changed.") },
        problems: { 404: ["not-found"], 409: ["custom-domain-taken"] },
      }),
    },
    "/worlds/{org}/{world}/api-keys": {
      get: adminOperation({
        operationId: "listApiKeys",
        summary: "List a world's API keys (never their tokens)",
        tags: ["worlds"],
        parameters: [...world, ...page],
        responses: { "200": json("ApiKeyPage", "A page of keys, revoked ones included.") },
        problems: mergeProblems(LIST_PROBLEMS, NOT_FOUND),
      }),
      post: adminOperation({
        operationId: "createApiKey",
        summary: "Create a map-storage API key",
        description: "The token is in this answer only; the database keeps its hash. No body is the same as `{}`.",
        tags: ["worlds"],
        parameters: world,
        requestBody: jsonRequestBody(schemaRef("CreateApiKeyRequest"), { required: false }),
        responses: { "201": jsonResponse("Created; the token is shown once.", schemaRef("CreatedApiKey"), { ...locationHeader("key"), ...noStore }) },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/api-keys/{id}": {
      get: adminOperation({
        operationId: "getApiKey",
        summary: "Read an API key",
        tags: ["worlds"],
        parameters: [...world, parameterRef("ApiKeyId")],
        responses: { "200": json("ApiKey", "The key.") },
        problems: NOT_FOUND,
      }),
      delete: adminOperation({
        operationId: "revokeApiKey",
        summary: "Revoke an API key",
        description: "map-storage refuses it within its key cache's lifetime (5 s by default).",
        tags: ["worlds"],
        parameters: [...world, parameterRef("ApiKeyId")],
        responses: { "204": emptyResponse("Revoked.") },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/endpoints": {
      get: adminOperation({
        operationId: "listEndpoints",
        summary: "List a world's webhook endpoints (never their secrets)",
        tags: ["endpoints"],
        parameters: [...world, ...page],
        responses: { "200": json("EndpointPage", "A page of endpoints.") },
        problems: mergeProblems(LIST_PROBLEMS, NOT_FOUND),
      }),
      post: adminOperation({
        operationId: "createEndpoint",
        summary: "Add a webhook endpoint",
        description: "The answer carries the signing secret; it is shown again only on rotation.",
        tags: ["endpoints"],
        parameters: world,
        requestBody: jsonRequestBody(schemaRef("CreateEndpointRequest")),
        responses: { "201": jsonResponse("Created.", schemaRef("EndpointWithSecret"), { ...locationHeader("endpoint"), ...noStore }) },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/endpoints/import-legacy": {
      post: adminOperation({
        operationId: "importLegacyEndpoint",
        summary: "Import the legacy single-URL setting as a `legacy` endpoint",
        tags: ["endpoints"],
        parameters: world,
        requestBody: jsonRequestBody(schemaRef("ImportLegacyEndpointRequest")),
        responses: { "201": jsonResponse("Created, without a secret.", schemaRef("Endpoint"), locationHeader("endpoint")) },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/endpoints/{id}": {
      get: adminOperation({
        operationId: "getEndpoint",
        summary: "Read a webhook endpoint",
        tags: ["endpoints"],
        parameters: endpoint,
        responses: { "200": json("Endpoint", "The endpoint.") },
        problems: NOT_FOUND,
      }),
      patch: adminOperation({
        operationId: "updateEndpoint",
        summary: "Change an endpoint's URL or subscriptions",
        tags: ["endpoints"],
        parameters: endpoint,
        requestBody: jsonRequestBody(schemaRef("UpdateEndpointRequest"), { mergePatch: true }),
        responses: { "200": json("Endpoint", "The endpoint as changed.") },
        problems: NOT_FOUND,
      }),
      delete: adminOperation({
        operationId: "deleteEndpoint",
        summary: "Delete a webhook endpoint and its history",
        tags: ["endpoints"],
        parameters: endpoint,
        responses: { "204": emptyResponse("Deleted.") },
        problems: NOT_FOUND,
      }),
    },
    ...Object.fromEntries(
      (
        [
          ["disable", "disableEndpoint", "Disable an endpoint (its waiting deliveries become `skipped`)", "Endpoint"],
          ["enable", "enableEndpoint", "Enable an endpoint (nothing skipped is sent later)", "Endpoint"],
          ["rotate-secret", "rotateEndpointSecret", "Generate a new secret; the old one is invalid at once", "EndpointWithSecret"],
        ] as const
      ).map(([action, operationId, summary, answer]) => [
        `/worlds/{org}/{world}/endpoints/{id}/${action}`,
        {
          post: adminOperation({
            operationId,
            summary,
            description: "Takes no body; one sent anyway is ignored.",
            tags: ["endpoints"],
            parameters: endpoint,
            responses: { "200": jsonResponse("The endpoint.", schemaRef(answer), answer === "EndpointWithSecret" ? noStore : undefined) },
            problems: NOT_FOUND,
          }),
        },
      ]),
    ),
    "/worlds/{org}/{world}/endpoints/{id}/format": {
      put: adminOperation({
        operationId: "setEndpointFormat",
        summary: "Switch an endpoint's body format",
        tags: ["endpoints"],
        parameters: endpoint,
        requestBody: jsonRequestBody(schemaRef("SetEndpointFormatRequest")),
        responses: { "200": json("Endpoint", "The endpoint.") },
        problems: { 404: ["not-found"], 409: ["endpoint-secret-required"] },
      }),
    },
    "/worlds/{org}/{world}/endpoints/{id}/test": {
      post: adminOperation({
        operationId: "testEndpoint",
        summary: "Send a test delivery now and report what the receiver did",
        description: "Works on disabled endpoints and never changes the endpoint's state.",
        tags: ["deliveries"],
        parameters: endpoint,
        requestBody: jsonRequestBody(schemaRef("TestDeliveryRequest"), { required: false }),
        responses: { "200": json("TestDelivery", "The attempt's outcome, whatever the receiver answered.") },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/endpoints/{id}/deliveries": {
      get: adminOperation({
        operationId: "listDeliveries",
        summary: "An endpoint's deliveries, newest first",
        tags: ["deliveries"],
        parameters: [...endpoint, ...page, parameterRef("DeliveryStatus")],
        responses: { "200": json("DeliverySummaryPage", "A page of deliveries.") },
        problems: mergeProblems(LIST_PROBLEMS, NOT_FOUND),
      }),
    },
    "/worlds/{org}/{world}/endpoints/{id}/deliveries/{deliveryId}": {
      get: adminOperation({
        operationId: "getDelivery",
        summary: "One delivery with every attempt",
        tags: ["deliveries"],
        parameters: delivery,
        responses: { "200": json("Delivery", "The delivery.") },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/endpoints/{id}/deliveries/{deliveryId}/replay": {
      post: adminOperation({
        operationId: "replayDelivery",
        summary: "Queue a delivery again (same deliveryId, byte-identical body)",
        description: "Takes no body; one sent anyway is ignored.",
        tags: ["deliveries"],
        parameters: delivery,
        responses: { "202": jsonResponse("Queued.", schemaRef("DeliverySummary"), locationHeader("delivery")) },
        problems: { 404: ["not-found"], 409: ["endpoint-disabled"] },
      }),
    },
  };
}

function adminComponents(components: ComponentSchemas): void {
  addProblemSchema(components);
  const add = (name: string, schema: object) => components.add(name, schema);
  add("CreateOrganizationRequest", CREATE_ORGANIZATION_REQUEST_SCHEMA);
  add("CreateWorldRequest", CREATE_WORLD_REQUEST_SCHEMA);
  add("UpdateWorldRequest", UPDATE_WORLD_REQUEST_SCHEMA);
  add("CreateApiKeyRequest", CREATE_API_KEY_REQUEST_SCHEMA);
  add("CreateEndpointRequest", CREATE_ENDPOINT_REQUEST_SCHEMA);
  add("UpdateEndpointRequest", UPDATE_ENDPOINT_REQUEST_SCHEMA);
  add("SetEndpointFormatRequest", SET_ENDPOINT_FORMAT_REQUEST_SCHEMA);
  add("ImportLegacyEndpointRequest", IMPORT_LEGACY_ENDPOINT_REQUEST_SCHEMA);
  add("TestDeliveryRequest", TEST_DELIVERY_REQUEST_SCHEMA);
  add("Organization", ORGANIZATION_SCHEMA);
  add("World", WORLD_SCHEMA);
  add("ApiKey", API_KEY_SCHEMA);
  add("CreatedApiKey", CREATED_API_KEY_SCHEMA);
  add("Endpoint", ENDPOINT_SCHEMA);
  add("EndpointWithSecret", ENDPOINT_WITH_SECRET_SCHEMA);
  add("DeliverySummary", DELIVERY_SUMMARY_SCHEMA);
  add("Attempt", ATTEMPT_SCHEMA);
  add("Delivery", DELIVERY_SCHEMA);
  add("TestDelivery", TEST_DELIVERY_SCHEMA);
  add("OrganizationPage", pageSchema("Organizations", schemaRef("Organization")));
  add("WorldPage", pageSchema("Worlds", schemaRef("World")));
  add("ApiKeyPage", pageSchema("API keys", schemaRef("ApiKey")));
  add("EndpointPage", pageSchema("Webhook endpoints", schemaRef("Endpoint")));
  add("DeliverySummaryPage", pageSchema("Deliveries", schemaRef("DeliverySummary")));
}

const ADMIN_PARAMETERS: Record<string, JsonObject> = {
  Organization: pathParameter("org", "The organization's slug.", { type: "string", pattern: SLUG_PATTERN }),
  World: pathParameter("world", "The world's slug.", { type: "string", pattern: SLUG_PATTERN }),
  ApiKeyId: pathParameter("id", "The API key's id."),
  EndpointId: pathParameter("id", "The endpoint's id."),
  DeliveryId: pathParameter("deliveryId", "The delivery's id (its `webhook-id`)."),
  DeliveryStatus: {
    name: "status",
    in: "query",
    required: false,
    description: "Only deliveries in this state.",
    schema: { enum: [...DELIVERY_STATUSES] },
  },
  ...PAGE_PARAMETERS,
};

/** Options of {@link buildAdminApiDocument}. */
export interface AdminApiDocumentOptions {
  /** Public base address of admin-api (`servers[0].url`); omitted when not given. */
  serverUrl?: string;
}

/**
 * Builds admin-api's OpenAPI 3.1 document: a fresh object on every call. Its `webhooks`,
 * component schemas of the deliveries and their parameters are those of {@link buildOpenApiDocument}.
 */
export function buildAdminApiDocument(options: AdminApiDocumentOptions = {}): JsonObject {
  const webhooksDoc = buildOpenApiDocument(options.serverUrl === undefined ? {} : { serverUrl: options.serverUrl });
  const components = new ComponentSchemas();
  for (const [name, schema] of Object.entries(webhooksDoc.components.schemas)) components.add(name, schema);
  const paths: Record<string, Record<string, JsonObject>> = { ...serviceRoutes("admin", components) };
  adminComponents(components);
  for (const [path, item] of Object.entries(adminPaths())) paths[`${ADMIN_API_BASE_PATH}${path}`] = item;

  return {
    openapi: "3.1.0",
    info: {
      title: "Virtual-world admin API",
      version: webhooksDoc.info.version,
      description:
        "What the dashboard does: organizations, worlds, map-storage API keys, webhook endpoints, Test, delivery history and " +
        "Replay. Every error is an RFC 9457 problem document whose `type` is in the catalogue of problem types. " +
        `The \`webhooks\` section describes what endpoints receive. ${webhooksDoc.info.description}`,
    },
    jsonSchemaDialect: webhooksDoc.jsonSchemaDialect,
    ...(webhooksDoc.servers ? { servers: webhooksDoc.servers } : {}),
    tags: [OPERATIONS_TAG, ...TAGS, ...webhooksDoc.tags],
    paths,
    webhooks: webhooksDoc.webhooks,
    components: {
      schemas: components.build(),
      parameters: { ...webhooksDoc.components.parameters, ...structuredClone(ADMIN_PARAMETERS) },
      responses: webhooksDoc.components.responses,
      securitySchemes: {
        [ADMIN_TOKEN_SCHEME]: { type: "http", scheme: "bearer", description: "`Authorization: Bearer <ADMIN_TOKEN>`." },
      },
    },
  };
}
