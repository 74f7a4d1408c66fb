/**
 * Map authors' tools in map-storage's OpenAPI document: `{base}/ping`, `{base}/upload`,
 * `{base}/download` (as WorkAdventure's map-storage answers them; `@workadventure/upload-maps` is
 * the client) and `{base}/rooms`, where `{base}` is `/{organization}/{world}`.
 */
import { PING_SCHEMA, ROOM_LIST_SCHEMA, UPLOAD_RESULT_SCHEMA } from "../map-storage.schema.js";
import { ComponentSchemas, emptyResponse, jsonResponse, mergeProblems, operation, parameterRef, schemaRef, type JsonObject, type ProblemMap } from "./document-kit.js";
import { ALWAYS_PROBLEMS } from "./service-routes.js";

const KEYED: ProblemMap = mergeProblems(ALWAYS_PROBLEMS, {
  401: ["missing-token", "invalid-token"],
  403: ["wrong-world"],
  // Failed authentication is counted per client with the files API's (AUTH_FAILURES_MAX).
  429: ["too-many-failed-attempts"],
  503: ["dependency-unavailable"],
});

const DIRECTORY =
  "A path inside the world; absent, empty, `/`, `.` and `./` are the world's root. Refused with 400 `invalid-path`: `.` or `..` " +
  "segments, backslashes, empty segments, segments starting with `.`, control characters, more than 512 bytes.";

/** The four paths, keyed by their OpenAPI template; `apiKey` names the bearer scheme. */
export function toolPaths(components: ComponentSchemas, apiKey: string): Record<string, Record<string, JsonObject>> {
  components.add("Ping", PING_SCHEMA);
  components.add("UploadResult", UPLOAD_RESULT_SCHEMA);
  components.add("RoomList", ROOM_LIST_SCHEMA);
  const world = [parameterRef("Organization"), parameterRef("World")];
  const tags = ["map authors' tools"];
  const preflight = (name: string) =>
    operation(
      {
        operationId: `preflight${name}`,
        summary: "CORS preflight",
        tags,
        security: null,
        parameters: world,
        responses: { "204": emptyResponse("Allowed methods and headers in the `Access-Control-Allow-*` headers.") },
      },
      ALWAYS_PROBLEMS,
    );
  return {
    "/{organization}/{world}/ping": {
      get: operation(
        {
          operationId: "ping",
          summary: "Check a world's base address (public)",
          description:
            "200 when the world exists: what the upload tool checks an address typed in by hand with. An unknown world is a 404, " +
            "which the tool reports as an address that does not exist.",
          tags,
          security: null,
          parameters: world,
          responses: { "200": jsonResponse("The base address is a world's.", schemaRef("Ping")) },
          problems: { 404: ["unknown-world"], 503: ["dependency-unavailable"] },
        },
        ALWAYS_PROBLEMS,
      ),
      options: preflight("Ping"),
    },
    "/{organization}/{world}/upload": {
      post: operation(
        {
          operationId: "uploadDirectory",
          summary: "Replace a directory with a zip's contents",
          description:
            "`multipart/form-data` with a `file` part (the zip) and a `directory` field. Every file of the directory that the zip does " +
            "not hold is deleted afterwards; entries with a path segment starting with `.` and directory entries are skipped. The whole " +
            "zip is checked before anything is written (a refused upload changes nothing): entry paths (an entry climbing out is 400 " +
            "`invalid-path`), sizes as actually unpacked (`MAX_FILE_BYTES` per file, `MAX_JSON_FILE_BYTES` per `.wam`, " +
            "`MAX_UPLOAD_BYTES` in all: 413), `.wam` files as `PUT` checks them (400 `invalid-wam` naming the file in `file`), and the " +
            "world's storage quota, counting what the upload replaces (413 `quota-exceeded`). New files are written before stale ones " +
            "are deleted. Uploads to one world run one at a time across every instance, and at most MAX_CONCURRENT_UPLOADS at once " +
            "per instance (others wait, then 503 `file-busy`).",
          tags,
          security: apiKey,
          parameters: world,
          requestBody: {
            required: true,
            content: {
              "multipart/form-data": {
                schema: {
                  type: "object",
                  required: ["file"],
                  properties: {
                    file: { type: "string", contentMediaType: "application/zip", description: "The zip (the build's `dist/` folder)." },
                    directory: { type: "string", description: DIRECTORY },
                  },
                },
              },
            },
          },
          responses: { "200": jsonResponse("Published.", schemaRef("UploadResult")) },
          problems: {
            400: ["invalid-request", "invalid-zip", "invalid-wam", "malformed-json", "too-deeply-nested"],
            413: ["payload-too-large", "quota-exceeded"],
            415: ["unsupported-media-type"],
            503: ["file-busy"],
          },
        },
        KEYED,
      ),
      options: preflight("Upload"),
    },
    "/{organization}/{world}/download": {
      get: operation(
        {
          operationId: "downloadDirectory",
          summary: "A directory as a zip",
          description: "Every file under the directory, named relative to it, streamed as it is read. A failure midway cuts the answer.",
          tags,
          security: apiKey,
          parameters: [...world, { name: "directory", in: "query", required: false, description: DIRECTORY, schema: { type: "string" } }],
          responses: {
            "200": {
              description: "The zip.",
              headers: { "Content-Disposition": { description: "`attachment; filename=\"<directory's last segment or the world>.zip\"`.", schema: { type: "string" } } },
              content: { "application/zip": { schema: {} } },
            },
          },
          problems: { 404: ["file-not-found"] },
        },
        KEYED,
      ),
      options: preflight("Download"),
    },
    "/{organization}/{world}/rooms": {
      get: operation(
        {
          operationId: "listRooms",
          summary: "The world's rooms",
          description:
            "Its `.wam` files in path order, each with its URL, its room URL and the `mapUrl` and `metadata` it declares. Also " +
            "accepts the operator's `ADMIN_TOKEN` (admin-api lists rooms for its dashboard this way).",
          tags,
          security: apiKey,
          parameters: [
            ...world,
            { name: "limit", in: "query", required: false, description: "Page size, 1-100 (50 by default).", schema: { type: "integer", minimum: 1, maximum: 100, default: 50 } },
            { name: "cursor", in: "query", required: false, description: "The `nextCursor` of the previous page, as given.", schema: { type: "string" } },
          ],
          responses: { "200": jsonResponse("A page of rooms.", schemaRef("RoomList")) },
          problems: { 404: ["unknown-world"] },
        },
        KEYED,
      ),
      options: preflight("Rooms"),
    },
  };
}
