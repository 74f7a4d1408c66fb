/** Map storage API contracts: the JSON answers of map-storage (file bodies themselves are bytes). */

const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

/** Answer of a `PUT` or `PATCH` of a file. */
export interface FileWriteResource {
  /** The file's path inside the world (decoded). */
  path: string;
  /** The file's public URL. */
  url: string;
  /** The new strong ETag (also in the `ETag` header). */
  etag: string;
  /** The room's URL, for `.wam` files only. */
  roomUrl?: string;
}

/** Schema of {@link FileWriteResource}. */
export const FILE_WRITE_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:map-storage:file-write",
  title: "File written",
  type: "object",
  additionalProperties: false,
  required: ["path", "url", "etag"],
  properties: {
    path: { type: "string", description: "The file's path inside the world, decoded (`rooms/hall.wam`)." },
    url: { type: "string", format: "uri", description: "`{PUBLIC_MAP_STORAGE_URL}/<organization>/<world>/<path>`" },
    etag: { type: "string", pattern: '^"[^"]*"$', description: "The new strong entity tag, also sent as `ETag`." },
    roomUrl: {
      type: "string",
      format: "uri",
      description: "`.wam` files only: `{PLAY_URL}/@/<organization>/<world>/<path>`, or `https://<custom domain>/@/<path>`.",
    },
  },
} as const;

/** Answer of `GET /schemas/wam`. */
export const WAM_SCHEMA_LIST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:map-storage:wam-schema-list",
  title: "Known WAM versions",
  type: "object",
  additionalProperties: false,
  required: ["versions"],
  properties: {
    versions: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["version", "url"],
        properties: { version: { type: "string" }, url: { type: "string", format: "uri" } },
      },
    },
  },
} as const;

/** A JSON Patch document (RFC 6902), as `PATCH` takes it; map-storage checks each operation with fast-json-patch. */
export const JSON_PATCH_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:map-storage:json-patch",
  title: "JSON Patch (RFC 6902)",
  type: "array",
  items: {
    type: "object",
    required: ["op", "path"],
    properties: {
      op: { enum: ["add", "remove", "replace", "move", "copy", "test"] },
      path: { type: "string", description: "JSON pointer into the file." },
      from: { type: "string", description: "`move` and `copy`: the JSON pointer to take the value from." },
      value: { description: "`add`, `replace` and `test`: the value." },
    },
  },
} as const;
