/** The routes of admin-api's `/admin/v1`, as OpenAPI path items (relative to the prefix). */
import { emptyResponse, jsonRequestBody, jsonResponse, mergeProblems, parameterRef, schemaRef, type JsonObject } from "./document-kit.js";
import { LIST_PROBLEMS, NOT_FOUND, adminOperation, locationHeader, noStore } from "./admin-common.openapi.js";

/** A write that can add an endpoint or an `auth` subscription: the world's quotas apply. */
const QUOTA_PROBLEMS = mergeProblems(NOT_FOUND, { 409: ["quota-exceeded"] });

/** The routes of `/admin/v1`, keyed by path relative to the prefix. */
export function adminPaths(): Record<string, Record<string, JsonObject>> {
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
        description:
          "`adminEmails`, `customDomain` and `quotas` are the platform operator's (ADMIN_TOKEN): a dashboard session sending any " +
          "of them gets 403 `forbidden` with a pointer to each. Bind a `customDomain` only after verifying the world owns it.",
        responses: { "200": json("World", "The world as changed.") },
        problems: { 404: ["not-found"], 409: ["custom-domain-taken"] },
      }),
    },
    "/worlds/{org}/{world}/rooms": {
      get: adminOperation({
        operationId: "listRooms",
        summary: "List a world's rooms (its `.wam` files)",
        description:
          "As map-storage lists them (`GET {base}/rooms`, asked with this ADMIN_TOKEN at MAP_STORAGE_INTERNAL_URL): path order, " +
          "each with its URL, room URL, `mapUrl` and `metadata`. A page may hold fewer than `limit` rooms and still have a next one. " +
          "503 when map-storage does not answer.",
        tags: ["worlds"],
        parameters: [...world, parameterRef("Limit"), { name: "cursor", in: "query", required: false, description: "The `nextCursor` of the previous page, as given.", schema: { type: "string" } }],
        responses: { "200": json("RoomList", "A page of rooms.") },
        problems: mergeProblems(LIST_PROBLEMS, NOT_FOUND),
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
        description:
          "The answer carries the signing secret; it is shown again only on rotation. 409 `quota-exceeded` when the world has " +
          "`maxEndpoints` endpoints already, or `maxAuthEndpoints` subscribed to `auth` and this one is too. `headers` are write-only: " +
          "the answer, like every read, lists their names in `headerNames`. A reserved or malformed header is a 400 whose `errors[]` " +
          "points at it (`/headers/<name>`).",
        tags: ["endpoints"],
        parameters: world,
        requestBody: jsonRequestBody(schemaRef("CreateEndpointRequest")),
        responses: { "201": jsonResponse("Created.", schemaRef("EndpointWithSecret"), { ...locationHeader("endpoint"), ...noStore }) },
        problems: QUOTA_PROBLEMS,
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
        problems: QUOTA_PROBLEMS,
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
        summary: "Change an endpoint's URL, subscriptions, rate limit or custom headers",
        description:
          "409 `quota-exceeded` when `auth` is added and the world has `maxAuthEndpoints` subscribed to it already. `headers` replaces " +
          "the whole set of custom headers (`{}` removes them all); absent, they stay as they are.",
        tags: ["endpoints"],
        parameters: endpoint,
        requestBody: jsonRequestBody(schemaRef("UpdateEndpointRequest"), { mergePatch: true }),
        responses: { "200": json("Endpoint", "The endpoint as changed.") },
        problems: QUOTA_PROBLEMS,
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
        parameters: [...endpoint, ...page, ...["DeliveryStatus", "DeliveryType", "Since", "Until", "EventId"].map(parameterRef)],
        responses: { "200": json("DeliverySummaryPage", "A page of deliveries.") },
        problems: mergeProblems(LIST_PROBLEMS, NOT_FOUND),
      }),
    },
    "/worlds/{org}/{world}/stats": {
      get: adminOperation({
        operationId: "getWorldStats",
        summary: "A world's delivery figures over the last 24 h",
        description: "The figures of every endpoint the world has now, together (an endpoint deleted takes its figures with it).",
        tags: ["deliveries"],
        parameters: world,
        responses: { "200": json("EndpointStats", "Deliveries by status, attempts (in total and per hour), success rate, latency and the last attempt.") },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/endpoints/{id}/stats": {
      get: adminOperation({
        operationId: "getEndpointStats",
        summary: "An endpoint's figures over the last 24 h",
        tags: ["deliveries"],
        parameters: endpoint,
        responses: { "200": json("EndpointStats", "Deliveries by status, attempts (in total and per hour), success rate, latency and the last attempt.") },
        problems: NOT_FOUND,
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
    "/worlds/{org}/{world}/endpoints/{id}/recover": {
      post: adminOperation({
        operationId: "recoverDeliveries",
        summary: "Send again every failed delivery of an endpoint in a time window",
        description:
          "Same deliveryId and bytes as the originals, queued by a background job whose progress `GET .../recoveries/{recoveryId}` " +
          "shows. `dryRun: true` only counts them (200).",
        tags: ["deliveries"],
        parameters: endpoint,
        requestBody: jsonRequestBody(schemaRef("RecoverRequest")),
        responses: {
          "200": json("RecoverPreview", "Dry run: how many deliveries would be sent again."),
          "202": jsonResponse("The recovery was started.", schemaRef("Recovery"), locationHeader("recovery")),
        },
        problems: { 404: ["not-found"], 409: ["endpoint-disabled"] },
      }),
    },
    "/worlds/{org}/{world}/endpoints/{id}/recoveries/{recoveryId}": {
      get: adminOperation({
        operationId: "getRecovery",
        summary: "A recovery's progress",
        tags: ["deliveries"],
        parameters: [...endpoint, parameterRef("RecoveryId")],
        responses: { "200": json("Recovery", "The recovery.") },
        problems: NOT_FOUND,
      }),
    },
    "/worlds/{org}/{world}/dashboard-sessions": {
      post: adminOperation({
        operationId: "createDashboardSession",
        summary: "Mint a one-time dashboard link for a world (operator only)",
        description:
          "`url` opens the dashboard for the world once, within 10 minutes; the session it opens lasts `ttlSeconds` (3600 by " +
          "default, at most 86400) with the given capabilities (all four by default). No body is the same as `{}`.",
        tags: ["dashboard"],
        parameters: world,
        requestBody: jsonRequestBody(schemaRef("CreateDashboardSessionRequest"), { required: false }),
        responses: { "201": jsonResponse("The link.", schemaRef("DashboardSessionLink"), noStore) },
        problems: NOT_FOUND,
      }),
      delete: adminOperation({
        operationId: "revokeDashboardSessions",
        summary: "Revoke every dashboard session and unused link of a world (operator only)",
        tags: ["dashboard"],
        parameters: world,
        responses: { "204": emptyResponse("Revoked.") },
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
