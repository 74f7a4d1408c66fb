/**
 * The member directory's routes as OpenAPI path items: the Inbound API's member record on
 * admin-api (world API keys) and the platform's member intake on event-ingest (INGEST_TOKEN).
 */
import { MEMBER_PROFILE_REQUEST_SCHEMA, MEMBER_RESOURCE_SCHEMA } from "../members.schema.js";
import {
  ComponentSchemas,
  emptyResponse,
  jsonRequestBody,
  jsonResponse,
  operation,
  pathParameter,
  schemaRef,
  type JsonObject,
  type ProblemMap,
} from "./document-kit.js";
import { ALWAYS_PROBLEMS } from "./service-routes.js";

/** Security scheme of the Inbound API: `Authorization: Bearer <API_KEY>` of the world. */
export const WORLD_API_KEY_SCHEME = "worldApiKey";

/** The scheme's definition, for `components.securitySchemes`. */
export const WORLD_API_KEY_SECURITY: JsonObject = {
  type: "http",
  scheme: "bearer",
  description:
    "`Authorization: Bearer <API_KEY>`: an API key of the world (the map-storage keys). The spec does not show the Inbound " +
    "API's authentication; this is this project's choice.",
};

/** The member record's headers: it is personal data, never cached. */
const NO_STORE: JsonObject = { "Cache-Control": { description: "`no-store`: the answer is personal data.", schema: { type: "string" } } };

const UUID = pathParameter("uuid", "The person's identifier, as in webhook payloads (at most 200 characters).", { type: "string", minLength: 1, maxLength: 200 });

/** Adds `Member` (and, for the intake, `MemberProfileRequest`) to `components`. */
export function memberComponents(components: ComponentSchemas, options: { intake: boolean }): void {
  components.add("Member", MEMBER_RESOURCE_SCHEMA);
  if (options.intake) components.add("MemberProfileRequest", MEMBER_PROFILE_REQUEST_SCHEMA);
}

/** admin-api's Inbound API: `GET /api/v1/worlds/{worldSlug}/members/{uuid}`. */
export function inboundApiPaths(): Record<string, Record<string, JsonObject>> {
  const problems: ProblemMap = {
    401: ["missing-token", "invalid-token"],
    403: ["wrong-world"],
    404: ["not-found"],
    429: ["too-many-failed-attempts"],
    503: ["dependency-unavailable"],
  };
  return {
    "/api/v1/worlds/{worldSlug}/members/{uuid}": {
      get: operation(
        {
          operationId: "getMember",
          summary: "Look up a member or visitor (Inbound API)",
          description:
            "For customers' receivers: name, email, type and the latest consent decision per purpose, kept current from " +
            "`visitor.registered` and `consent.changed` (the newest decision wins whatever the arrival order) and the platform's " +
            "member intake. `{worldSlug}` must be the slug of the key's world (403 otherwise); a member of another world is 404.",
          tags: ["inbound-api"],
          security: WORLD_API_KEY_SCHEME,
          parameters: [pathParameter("worldSlug", "Slug of the key's world."), UUID],
          responses: { "200": jsonResponse("The member record.", schemaRef("Member"), NO_STORE) },
          problems,
        },
        ALWAYS_PROBLEMS,
      ),
    },
  };
}

/** event-ingest's member intake, built with the service's own authenticated-operation builder. */
export function memberIntakePaths(ingestOperation: (spec: Omit<Parameters<typeof operation>[0], "security">) => JsonObject): Record<string, Record<string, JsonObject>> {
  const parameters = [pathParameter("org", "Organization slug."), pathParameter("world", "World slug."), UUID];
  return {
    "/v1/worlds/{org}/{world}/members/{uuid}": {
      put: ingestOperation({
        operationId: "putMember",
        summary: "Create or replace a member of the directory",
        description:
          "For people no event announces (members invited by administrators). Replaces name, email and type; recorded " +
          "consents are kept. This project's choice: the spec shows no such route.",
        tags: ["members"],
        parameters,
        requestBody: jsonRequestBody(schemaRef("MemberProfileRequest")),
        responses: {
          "200": jsonResponse("Replaced; the member record.", schemaRef("Member"), NO_STORE),
          "201": jsonResponse("Created; the member record.", schemaRef("Member"), NO_STORE),
        },
        problems: { 400: ["invalid-parameter"], 404: ["unknown-world"] },
      }),
      delete: ingestOperation({
        operationId: "deleteMember",
        summary: "Delete a member and their consents",
        description: "Events not newer than the deletion are ignored afterwards, so a late delivery never brings the person back.",
        tags: ["members"],
        parameters,
        responses: { "204": emptyResponse("Deleted.") },
        problems: { 404: ["unknown-world", "not-found"] },
      }),
    },
  };
}
