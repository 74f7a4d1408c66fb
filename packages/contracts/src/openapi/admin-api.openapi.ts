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
  CREATE_DASHBOARD_SESSION_REQUEST_SCHEMA,
  DASHBOARD_SESSION_LINK_RESOURCE_SCHEMA,
  DASHBOARD_SESSION_RESOURCE_SCHEMA,
  EXCHANGE_DASHBOARD_CODE_REQUEST_SCHEMA,
  RECOVER_PREVIEW_RESOURCE_SCHEMA,
  RECOVER_REQUEST_SCHEMA,
  RECOVERY_RESOURCE_SCHEMA,
} from "../dashboard.schema.js";
import { ROOM_LIST_SCHEMA } from "../map-storage.schema.js";
import {
  ATTEMPT_SCHEMA,
  DELIVERY_SCHEMA,
  DELIVERY_STATUSES,
  DELIVERY_SUMMARY_SCHEMA,
  ENDPOINT_STATS_SCHEMA,
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
import { ADMIN_API_BASE_PATH, ADMIN_TOKEN_SCHEME, DASHBOARD_SESSION_SCHEME } from "./admin-common.openapi.js";
import { dashboardPaths } from "./admin-dashboard.openapi.js";
import { adminPaths } from "./admin-paths.openapi.js";
import { ComponentSchemas, PAGE_PARAMETERS, addProblemSchema, pageSchema, pathParameter, schemaRef, type JsonObject } from "./document-kit.js";
import { WORLD_API_KEY_SCHEME, WORLD_API_KEY_SECURITY, inboundApiPaths, memberComponents } from "./members.openapi.js";
import { OPERATIONS_TAG, serviceRoutes } from "./service-routes.js";

export * from "./admin-common.openapi.js";
export { ADMIN_MIDDLEWARE_PATHS } from "./admin-dashboard.openapi.js";

const TAGS = [
  { name: "organizations", description: "Organizations and their worlds." },
  { name: "worlds", description: "A world's settings and its map-storage API keys." },
  { name: "endpoints", description: "Webhook endpoints of a world and the actions on them." },
  { name: "deliveries", description: "Test, delivery history and Replay." },
  { name: "dashboard", description: "Dashboard links and sessions, and the dashboard page." },
];

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
  add("EndpointStats", ENDPOINT_STATS_SCHEMA);
  add("OrganizationPage", pageSchema("Organizations", schemaRef("Organization")));
  add("WorldPage", pageSchema("Worlds", schemaRef("World")));
  add("ApiKeyPage", pageSchema("API keys", schemaRef("ApiKey")));
  add("RoomList", ROOM_LIST_SCHEMA);
  add("EndpointPage", pageSchema("Webhook endpoints", schemaRef("Endpoint")));
  add("DeliverySummaryPage", pageSchema("Deliveries", schemaRef("DeliverySummary")));
  add("CreateDashboardSessionRequest", CREATE_DASHBOARD_SESSION_REQUEST_SCHEMA);
  add("DashboardSessionLink", DASHBOARD_SESSION_LINK_RESOURCE_SCHEMA);
  add("ExchangeDashboardCodeRequest", EXCHANGE_DASHBOARD_CODE_REQUEST_SCHEMA);
  add("DashboardSession", DASHBOARD_SESSION_RESOURCE_SCHEMA);
  add("RecoverRequest", RECOVER_REQUEST_SCHEMA);
  add("Recovery", RECOVERY_RESOURCE_SCHEMA);
  add("RecoverPreview", RECOVER_PREVIEW_RESOURCE_SCHEMA);
}

/** Whether a dashboard session (of that world) may call `path` of `/admin/v1`; the operator may call every route. */
const sessionMayCall = (path: string) => path.startsWith("/worlds/{org}/{world}") && !path.endsWith("/dashboard-sessions");

const ADMIN_PARAMETERS: Record<string, JsonObject> = {
  Organization: pathParameter("org", "The organization's slug.", { type: "string", pattern: SLUG_PATTERN }),
  World: pathParameter("world", "The world's slug.", { type: "string", pattern: SLUG_PATTERN }),
  ApiKeyId: pathParameter("id", "The API key's id."),
  EndpointId: pathParameter("id", "The endpoint's id."),
  DeliveryId: pathParameter("deliveryId", "The delivery's id (its `webhook-id`)."),
  RecoveryId: pathParameter("recoveryId", "The recovery's id."),
  DashboardAsset: { ...pathParameter("asset", "A file path under the dashboard (`assets/index-3f2a.js`), or a page route."), "x-multi-segment": true },
  DeliveryStatus: {
    name: "status",
    in: "query",
    required: false,
    description: "Only deliveries in this state.",
    schema: { enum: [...DELIVERY_STATUSES] },
  },
  DeliveryType: { name: "type", in: "query", required: false, description: "Only deliveries of this event type.", schema: { type: "string", minLength: 1, maxLength: 200 } },
  Since: {
    name: "since",
    in: "query",
    required: false,
    description: "Only deliveries created at or after this RFC 3339 date-time (with an offset or `Z`).",
    schema: { type: "string", format: "date-time" },
  },
  Until: {
    name: "until",
    in: "query",
    required: false,
    description: "Only deliveries created before this RFC 3339 date-time; later than `since`.",
    schema: { type: "string", format: "date-time" },
  },
  EventId: { name: "eventId", in: "query", required: false, description: "Only deliveries of the event with this producer id.", schema: { type: "string", minLength: 1, maxLength: 200 } },
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
  for (const [path, item] of Object.entries(adminPaths())) {
    if (sessionMayCall(path)) {
      for (const op of Object.values(item)) op["security"] = [{ [ADMIN_TOKEN_SCHEME]: [] }, { [DASHBOARD_SESSION_SCHEME]: [] }];
    }
    paths[`${ADMIN_API_BASE_PATH}${path}`] = item;
  }
  Object.assign(paths, dashboardPaths());
  memberComponents(components, { intake: false });
  Object.assign(paths, inboundApiPaths());

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
    tags: [
      OPERATIONS_TAG,
      ...TAGS,
      { name: "inbound-api", description: "For customers' receivers, with a world API key: the member record." },
      ...webhooksDoc.tags,
    ],
    paths,
    webhooks: webhooksDoc.webhooks,
    components: {
      schemas: components.build(),
      parameters: { ...webhooksDoc.components.parameters, ...structuredClone(ADMIN_PARAMETERS) },
      responses: webhooksDoc.components.responses,
      securitySchemes: {
        [WORLD_API_KEY_SCHEME]: WORLD_API_KEY_SECURITY,
        [ADMIN_TOKEN_SCHEME]: { type: "http", scheme: "bearer", description: "`Authorization: Bearer <ADMIN_TOKEN>`: the platform operator, every route." },
        [DASHBOARD_SESSION_SCHEME]: {
          type: "apiKey",
          in: "cookie",
          name: "__Host-vw-dashboard",
          description:
            "The dashboard session cookie (`vw-dashboard` over plain http): the routes of the session's own world, with its " +
            "capabilities; requests that change state must carry the dashboard's own `Origin`.",
        },
      },
    },
  };
}
