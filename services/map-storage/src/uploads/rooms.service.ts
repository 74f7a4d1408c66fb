import type { RoomListItem, RoomListPage } from "@vw/contracts";
import { AppError } from "@vw/service-kit";
import type { FilePath } from "../files/file-path.js";
import type { FilesService } from "../files/files.service.js";
import { jsonStringBytes, measureJson } from "../files/json-size.js";
import type { ObjectStore } from "../storage/object-store.js";
import { ByteBudget } from "./byte-budget.js";
import { mapLimit } from "./map-limit.js";

/** Where a world's files and rooms are addressed from. */
export interface RoomAddressing {
  /** `{PUBLIC_MAP_STORAGE_URL}`: a file's URL is `<this>/<org>/<world>/<path>`. */
  publicBaseUrl: string;
  /** Builds the room URL of a `.wam` file (custom domain or `PLAY_URL`). */
  roomUrl: (file: FilePath) => string;
}

/** Default and largest page of `GET {base}/rooms`. */
export const ROOMS_PAGE = { default: 50, max: 100 } as const;
/** Keys examined by one page at most: a world of many non-room files answers a short page (with a cursor) rather than scan it all. */
const MAX_KEYS_SCANNED = 5000;
/**
 * Most bytes a room's `mapUrl` and `metadata` may each take in the listing, serialized: a WAM's
 * metadata is a name, a description, a thumbnail and a copyright. A larger one is listed as null,
 * so a page of 100 rooms answers at most a few MB, whatever the rooms hold.
 */
export const ROOM_DECLARED_MAX_BYTES = 64 * 1024;

function encodeCursor(path: string): string {
  return Buffer.from(path, "utf8").toString("base64url");
}

/** The path after which the next page starts, or a 400 naming the parameter. */
export function decodeCursor(cursor: string): string {
  const path = /^[A-Za-z0-9_-]{1,2000}$/.test(cursor) ? Buffer.from(cursor, "base64url").toString("utf8") : "";
  if (path === "" || path.includes("\u0000")) {
    throw new AppError(400, "invalid-parameter", "The cursor is not one this listing gave; start again without it.", { parameter: "cursor" });
  }
  return path;
}

/**
 * `GET {base}/rooms`: the world's rooms (its `.wam` files) in path order, each with its URL, its
 * room URL and the `mapUrl` and `metadata` it declares. The files are read through the file cache
 * (a hot room costs no S3 read). A `.wam` file whose content cannot be read as WAM (stored before
 * validation existed), or larger than `maxRoomBytes` (MAX_JSON_FILE_BYTES: stored before that
 * limit existed; it is then not read at all), is listed with `mapUrl` and `metadata` null, not hidden;
 * so is a `mapUrl` or `metadata` larger than {@link ROOM_DECLARED_MAX_BYTES}.
 *
 * Memory: rooms are read and parsed under `reading`, one budget of bytes for the whole process
 * (twice `maxRoomBytes` by default: two rooms of the largest size, or many small ones, at a time),
 * so the rooms parsed at once, by every listing together, hold a bounded amount; a page keeps only
 * what each room declares, within the cap above.
 */
export class RoomsService {
  constructor(
    private readonly store: ObjectStore,
    private readonly files: FilesService,
    private readonly maxRoomBytes: number,
    private readonly reading: ByteBudget = new ByteBudget(2 * maxRoomBytes),
  ) {}

  async list(org: string, world: string, addressing: RoomAddressing, limit: number, after: string | undefined): Promise<RoomListPage> {
    const prefix = `${org}/${world}/`;
    const found: { path: string; size: number }[] = [];
    let startAfter = after === undefined ? undefined : prefix + after;
    let scanned = 0;
    let more = false;
    while (found.length < limit) {
      const page = await this.store.list(prefix, startAfter, 1000);
      let stoppedEarly = false;
      for (const [i, { key, size }] of page.keys.entries()) {
        scanned++;
        startAfter = key;
        if (key.toLowerCase().endsWith(".wam")) found.push({ path: key.slice(prefix.length), size });
        if (found.length === limit || scanned >= MAX_KEYS_SCANNED) {
          stoppedEarly = i < page.keys.length - 1;
          break;
        }
      }
      more = stoppedEarly || page.truncated;
      if (!more || scanned >= MAX_KEYS_SCANNED) break;
    }
    const items: (RoomListItem | null)[] = new Array(found.length).fill(null);
    await mapLimit(
      found.map((room, index) => ({ ...room, index })),
      8,
      async ({ path, size, index }) => {
        items[index] = await this.item(org, world, path, size, addressing);
      },
    );
    const last = startAfter === undefined ? undefined : startAfter.slice(prefix.length);
    return { items: items.filter((i): i is RoomListItem => i !== null), nextCursor: more && last ? encodeCursor(last) : null };
  }

  private async item(org: string, world: string, path: string, size: number, addressing: RoomAddressing): Promise<RoomListItem | null> {
    const file: FilePath = { organization: org, world, path, objectKey: `${org}/${world}/${path}`, extension: "wam" };
    // Larger than what is parsed, as listed or as found (replaced since it was listed): not read.
    const declared = size > this.maxRoomBytes ? { mapUrl: null, metadata: null } : await this.reading.run(size, () => this.declared(file));
    if (declared === null) return null; // deleted since it was listed
    const { mapUrl, metadata } = declared;
    const url = `${addressing.publicBaseUrl}/${org}/${world}/${path.split("/").map(encodeURIComponent).join("/")}`;
    return { path, url, roomUrl: addressing.roomUrl(file), mapUrl, metadata };
  }

  /** What a room declares, each part within ROOM_DECLARED_MAX_BYTES; null when it is gone. */
  private async declared(file: FilePath): Promise<{ mapUrl: string | null; metadata: Record<string, unknown> | null } | null> {
    let body: Buffer | null;
    try {
      body = await this.files.readSmall(file, this.maxRoomBytes);
    } catch (err) {
      if (err instanceof AppError && err.status === 404) return null;
      throw err;
    }
    let mapUrl: string | null = null;
    let metadata: Record<string, unknown> | null = null;
    try {
      if (body === null) throw new Error("too large to read");
      const doc = JSON.parse(body.toString("utf8")) as { mapUrl?: unknown; metadata?: unknown };
      if (typeof doc.mapUrl === "string" && jsonStringBytes(doc.mapUrl) <= ROOM_DECLARED_MAX_BYTES) mapUrl = doc.mapUrl;
      if (typeof doc.metadata === "object" && doc.metadata !== null && !Array.isArray(doc.metadata) && !measureJson(doc.metadata, ROOM_DECLARED_MAX_BYTES).over) {
        metadata = doc.metadata as Record<string, unknown>;
      }
    } catch {
      // Not JSON, or too large: listed without what it would declare.
    }
    return { mapUrl, metadata };
  }
}
