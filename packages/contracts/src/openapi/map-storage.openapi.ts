/**
 * The OpenAPI 3.1 document map-storage serves at `GET /openapi.json`: the file API
 * (`/{organization}/{world}/{path}`), the WAM schemas and the service routes.
 */
import { SLUG_PATTERN } from "../admin.schema.js";
import { CURRENT_API_VERSION } from "../endpoints.schema.js";
import { SCHEMA_DIALECT } from "../events/event-types.js";
import { FILE_WRITE_SCHEMA, JSON_PATCH_SCHEMA, WAM_SCHEMA_LIST_SCHEMA } from "../map-storage.schema.js";
import {
  ComponentSchemas,
  addProblemSchema,
  emptyResponse,
  jsonResponse,
  mergeProblems,
  operation,
  parameterRef,
  schemaRef,
  type JsonObject,
  type ProblemMap,
} from "./document-kit.js";
import { ALWAYS_PROBLEMS, OPERATIONS_TAG, serviceRoutes } from "./service-routes.js";
import { toolPaths } from "./map-storage-tools.openapi.js";

/** Security scheme of `Authorization: Bearer <API_KEY>` (a key of the world, from the admin API). */
export const API_KEY_SCHEME = "apiKey";

/**
 * Extension marking a path parameter that spans several segments (`{path}` is `rooms/hall.wam`):
 * OpenAPI path parameters are one segment, so tools that route by the document must know.
 */
export const MULTI_SEGMENT_EXTENSION = "x-multi-segment";

const FILE_PROBLEMS: ProblemMap = mergeProblems(ALWAYS_PROBLEMS, {
  400: ["invalid-path", "invalid-precondition", "bad-request"],
  503: ["dependency-unavailable"],
});

const WRITE_PROBLEMS: ProblemMap = mergeProblems(FILE_PROBLEMS, {
  // JSON bodies and files: platform text, UTF-8 only, at most 64 levels (a patch result 422, a stored file too deep to patch 409).
  400: ["invalid-request", "too-deeply-nested"],
  409: ["too-deeply-nested"],
  415: ["unsupported-media-type"],
  422: ["too-deeply-nested"],
  401: ["missing-token", "invalid-token"],
  403: ["wrong-world"],
  412: ["precondition-failed"],
  429: ["too-many-failed-attempts"],
  503: ["file-busy", "write-conflict"],
});

const etagHeader: JsonObject = { ETag: { description: "The file's strong entity tag.", schema: { type: "string" } } };

const ifMatch: JsonObject = {
  name: "If-Match",
  in: "header",
  required: false,
  description: "Write only if the file's current `ETag` is one of these (or `*`: it exists); else 412.",
  schema: { type: "string" },
};
const ifNoneMatch: JsonObject = {
  name: "If-None-Match",
  in: "header",
  required: false,
  description: "`GET`: 304 when one of these is the current `ETag`. Writes: 412 when it is (`*`: when the file exists).",
  schema: { type: "string" },
};

function filePaths(): Record<string, JsonObject> {
  const file = [parameterRef("Organization"), parameterRef("World"), parameterRef("FilePath")];
  const tags = ["files"];
  const bytes = (description: string): JsonObject => ({
    description,
    headers: { ...etagHeader, "Cache-Control": { description: "`no-cache`: revalidate with `If-None-Match`.", schema: { type: "string" } } },
    content: { "*/*": { schema: {} } },
  });
  const written = (description: string, extraHeaders: JsonObject = {}) => jsonResponse(description, schemaRef("FileWrite"), { ...etagHeader, ...extraHeaders });
  return {
    get: operation(
      {
        operationId: "getFile",
        summary: "Read a file (public)",
        description: "The stored bytes, with the content type of the file's extension.",
        tags,
        security: null,
        parameters: [...file, ifNoneMatch],
        responses: { "200": bytes("The file."), "304": emptyResponse("Not modified.", etagHeader) },
        problems: { 404: ["file-not-found"] },
      },
      FILE_PROBLEMS,
    ),
    head: operation(
      {
        operationId: "headFile",
        summary: "A file's headers (public)",
        tags,
        security: null,
        parameters: [...file, ifNoneMatch],
        responses: { "200": emptyResponse("The file exists.", etagHeader), "304": emptyResponse("Not modified.", etagHeader) },
        problems: { 404: ["file-not-found"] },
      },
      FILE_PROBLEMS,
    ),
    put: operation(
      {
        operationId: "putFile",
        summary: "Create or replace a file",
        description:
          "The body is the file, stored byte for byte whatever its `Content-Type`. A `.wam` body must be a WAM file valid against " +
          "the schema of its `version` (`GET /schemas/wam/<version>.json`) and at most MAX_JSON_FILE_BYTES once decoded (other files: " +
          "MAX_FILE_BYTES). A file that would take the world past its storage quota is refused with 413 `quota-exceeded` " +
          "(`limit`, `bytesInUse`); replacing a file counts only what it adds.",
        tags,
        security: API_KEY_SCHEME,
        parameters: [...file, ifMatch, ifNoneMatch],
        requestBody: { required: true, content: { "*/*": { schema: {} } } },
        responses: {
          "200": written("Replaced."),
          "201": written("Created.", { Location: { description: "The file's URL.", schema: { type: "string" } } }),
        },
        problems: { 400: ["malformed-json"], 413: ["payload-too-large", "quota-exceeded"], 422: ["invalid-wam"] },
      },
      WRITE_PROBLEMS,
    ),
    patch: operation(
      {
        operationId: "patchFile",
        summary: "Apply a JSON Patch to a JSON file, atomically",
        description:
          "At most MAX_PATCH_OPERATIONS operations (413). The result may be at most MAX_JSON_FILE_BYTES: a patch that would grow " +
          "the file past it is refused (413) at the operation that crosses it, before that operation runs; a stored file larger " +
          "than that cannot be patched (413: replace it with PUT). A result that would take the world past its storage quota is " +
          "413 `quota-exceeded`.",
        tags,
        security: API_KEY_SCHEME,
        parameters: [...file, ifMatch, ifNoneMatch],
        requestBody: { required: true, content: { "application/json-patch+json": { schema: schemaRef("JsonPatch") } } },
        responses: { "200": written("Applied.") },
        problems: {
          400: ["malformed-patch"],
          404: ["file-not-found"],
          409: ["not-json", "patch-test-failed", "patch-conflict"],
          413: ["payload-too-large", "quota-exceeded"],
          415: ["unsupported-media-type"],
          422: ["invalid-wam"],
        },
      },
      WRITE_PROBLEMS,
    ),
    delete: operation(
      {
        operationId: "deleteFile",
        summary: "Delete a file",
        tags,
        security: API_KEY_SCHEME,
        parameters: [...file, ifMatch],
        responses: { "204": emptyResponse("Deleted.") },
        problems: { 404: ["file-not-found"] },
      },
      WRITE_PROBLEMS,
    ),
    options: operation(
      {
        operationId: "preflightFile",
        summary: "CORS preflight (any origin; keys are bearer tokens, never cookies)",
        tags,
        security: null,
        parameters: file,
        responses: { "204": emptyResponse("Allowed methods and headers in the `Access-Control-Allow-*` headers.") },
      },
      ALWAYS_PROBLEMS,
    ),
  };
}

/** Options of {@link buildMapStorageDocument}. */
export interface MapStorageDocumentOptions {
  /** PUBLIC_MAP_STORAGE_URL (`servers[0].url`); omitted when not given. */
  serverUrl?: string;
}

/** Builds map-storage's OpenAPI 3.1 document: a fresh object on every call. */
export function buildMapStorageDocument(options: MapStorageDocumentOptions = {}): JsonObject {
  const components = new ComponentSchemas();
  const paths: Record<string, Record<string, JsonObject>> = { ...serviceRoutes("map-storage", components) };
  addProblemSchema(components);
  components.add("FileWrite", FILE_WRITE_SCHEMA);
  components.add("JsonPatch", JSON_PATCH_SCHEMA);
  components.add("WamSchemaList", WAM_SCHEMA_LIST_SCHEMA);
  const schemasTag = ["schemas"];
  paths["/schemas/wam"] = {
    get: operation(
      {
        operationId: "listWamSchemas",
        summary: "The known WAM versions and their schemas' URLs",
        tags: schemasTag,
        security: null,
        responses: { "200": jsonResponse("The versions.", schemaRef("WamSchemaList")) },
      },
      ALWAYS_PROBLEMS,
    ),
  };
  paths["/schemas/wam/{file}"] = {
    get: operation(
      {
        operationId: "getWamSchema",
        summary: "The JSON Schema (draft 2020-12) of a WAM version",
        tags: schemasTag,
        security: null,
        parameters: [{ name: "file", in: "path", required: true, description: "`<version>.json`, e.g. `2.1.0.json`.", schema: { type: "string" } }],
        responses: { "200": { description: "The schema.", content: { "application/schema+json": { schema: { type: "object" } } } } },
        problems: { 404: ["unknown-schema-version"] },
      },
      ALWAYS_PROBLEMS,
    ),
  };
  paths["/{organization}/{world}/{path}"] = filePaths();
  Object.assign(paths, toolPaths(components, API_KEY_SCHEME));

  return {
    openapi: "3.1.0",
    info: {
      title: "Virtual-world map storage",
      version: CURRENT_API_VERSION,
      description:
        "The files of each world (rooms as `.wam` files, maps, images) on S3-compatible storage. Reads are public; writes need an " +
        "API key of the world. Every error is an RFC 9457 problem document whose `type` is in the catalogue of problem types.",
    },
    jsonSchemaDialect: SCHEMA_DIALECT,
    ...(options.serverUrl === undefined ? {} : { servers: [{ url: options.serverUrl }] }),
    tags: [
      OPERATIONS_TAG,
      { name: "files", description: "The map storage API." },
      { name: "schemas", description: "The WAM JSON Schemas." },
      { name: "map authors' tools", description: "Upload, download and ping as WorkAdventure's map-storage answers them, and the room listing." },
    ],
    paths,
    components: {
      schemas: components.build(),
      parameters: {
        Organization: { name: "organization", in: "path", required: true, description: "The organization's slug.", schema: { type: "string", pattern: SLUG_PATTERN } },
        World: { name: "world", in: "path", required: true, description: "The world's slug.", schema: { type: "string", pattern: SLUG_PATTERN } },
        FilePath: {
          name: "path",
          in: "path",
          required: true,
          description:
            "The file's path inside the world; it spans segments (`rooms/hall.wam`). Refused with 400 `invalid-path` before storage is " +
            "touched: `.` or `..` segments (encoded or not), encoded `/` or `\\`, empty segments, malformed percent-encoding, control " +
            "characters, more than 1024 bytes, and the names `ping`, `upload`, `download` and `rooms` at the world's root (map authors' tools).",
          schema: { type: "string" },
          [MULTI_SEGMENT_EXTENSION]: true,
        },
      },
      securitySchemes: {
        [API_KEY_SCHEME]: { type: "http", scheme: "bearer", description: "`Authorization: Bearer <API_KEY>`: a key of the world, created with the admin API." },
      },
    },
  };
}
