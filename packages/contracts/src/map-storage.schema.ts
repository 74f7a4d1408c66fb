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

/** A room (a `.wam` file) of a world, as `GET {base}/rooms` lists it. */
export interface RoomListItem {
  /** The `.wam` file's path inside the world. */
  path: string;
  /** The file's public URL. */
  url: string;
  /** The room's URL. */
  roomUrl: string;
  /** The TMJ map the room renders, as the WAM file declares it; null when the file cannot be read as WAM (or it is over 64 KiB). */
  mapUrl: string | null;
  /** The WAM file's `metadata` (`name`, `description`, `thumbnail`, `copyright`); null when absent, unreadable or over 64 KiB serialized. */
  metadata: Record<string, unknown> | null;
}

/** One page of `GET {base}/rooms`. */
export interface RoomListPage {
  items: RoomListItem[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** Schema of {@link RoomListPage}. */
export const ROOM_LIST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:map-storage:room-list",
  title: "Rooms of a world",
  type: "object",
  additionalProperties: false,
  required: ["items", "nextCursor"],
  properties: {
    items: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["path", "url", "roomUrl", "mapUrl", "metadata"],
        properties: {
          path: { type: "string", description: "The `.wam` file's path inside the world (`rooms/hall.wam`)." },
          url: { type: "string", format: "uri", description: "`{PUBLIC_MAP_STORAGE_URL}/<organization>/<world>/<path>`" },
          roomUrl: { type: "string", format: "uri", description: "`{PLAY_URL}/@/<organization>/<world>/<path>`, or `https://<custom domain>/@/<path>`." },
          mapUrl: { type: ["string", "null"], description: "The WAM file's `mapUrl`; null when the file cannot be read as WAM, or the URL is over 64 KiB." },
          metadata: { type: ["object", "null"], description: "The WAM file's `metadata` (`name`, `description`, `thumbnail`, `copyright`); null when absent, or over 64 KiB serialized." },
        },
      },
    },
    nextCursor: { type: ["string", "null"], description: "Pass as `cursor` for the next page; null on the last page. A page may hold fewer items than `limit` and still have a next one." },
  },
} as const;

/** Answer of `POST {base}/upload`. */
export interface UploadResult {
  /** The directory replaced, `""` for the world's root. */
  directory: string;
  /** How many files were written. */
  files: number;
  /** Unpacked bytes written. */
  bytes: number;
  /** Files of the directory the zip did not hold, deleted. */
  removed: number;
  /** Zip entries not published: directories, and paths with a segment starting with `.`. */
  skipped: number;
  /** The rooms (`.wam` files) the upload published. */
  rooms: { path: string; url: string; roomUrl: string }[];
}

/** Schema of {@link UploadResult}. */
export const UPLOAD_RESULT_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:map-storage:upload-result",
  title: "Upload published",
  type: "object",
  additionalProperties: false,
  required: ["directory", "files", "bytes", "removed", "skipped", "rooms"],
  properties: {
    directory: { type: "string", description: "The directory replaced, `\"\"` for the world's root." },
    files: { type: "integer", minimum: 1, description: "Files written." },
    bytes: { type: "integer", minimum: 0, description: "Unpacked bytes written." },
    removed: { type: "integer", minimum: 0, description: "Files of the directory the zip did not hold, deleted." },
    skipped: { type: "integer", minimum: 0, description: "Zip entries not published: directories, and paths with a segment starting with `.`." },
    rooms: {
      type: "array",
      description: "The rooms (`.wam` files) published.",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["path", "url", "roomUrl"],
        properties: { path: { type: "string" }, url: { type: "string", format: "uri" }, roomUrl: { type: "string", format: "uri" } },
      },
    },
  },
} as const;

/** Answer of `GET {base}/ping`. */
export const PING_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:map-storage:ping",
  title: "Ping",
  type: "object",
  additionalProperties: false,
  required: ["status"],
  properties: { status: { const: "ok" } },
} as const;
