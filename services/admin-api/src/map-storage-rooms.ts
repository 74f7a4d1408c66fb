import type { RoomListPage } from "@vw/contracts";
import { AppError } from "@vw/service-kit";

/** How admin-api reaches map-storage's room listing. */
export interface MapStorageRoomsOptions {
  /** MAP_STORAGE_INTERNAL_URL: map-storage as admin-api reaches it (no trailing slash). */
  baseUrl: string;
  /** ADMIN_TOKEN, which map-storage also accepts on `GET {base}/rooms`. */
  adminToken: string;
  /** Bound of one listing request. */
  timeoutMs: number;
}

const unavailable = (why: string) =>
  new AppError(503, "dependency-unavailable", `map-storage did not list the rooms (${why}); retry shortly.`, { headers: { "Retry-After": "2" } });

/**
 * The rooms of a world, read from map-storage (`GET {base}/rooms` with the operator's token):
 * map-storage owns the files, so admin-api has no S3 access of its own and asks the owner. When
 * map-storage is away this one route answers 503; everything else of admin-api is unaffected.
 */
export class MapStorageRooms {
  constructor(private readonly options: MapStorageRoomsOptions) {}

  async list(org: string, world: string, limit: number, cursor: string | undefined): Promise<RoomListPage> {
    const url = new URL(`${this.options.baseUrl}/${org}/${world}/rooms`);
    url.searchParams.set("limit", String(limit));
    if (cursor !== undefined) url.searchParams.set("cursor", cursor);
    let res: Response;
    try {
      res = await fetch(url, { headers: { authorization: `Bearer ${this.options.adminToken}` }, signal: AbortSignal.timeout(this.options.timeoutMs) });
    } catch (err) {
      throw unavailable((err as Error).name === "TimeoutError" ? `no answer within ${this.options.timeoutMs} ms` : "unreachable");
    }
    if (res.status === 200) return (await res.json()) as RoomListPage;
    const text = await res.text().catch(() => "");
    // Its own 400: a cursor that is not one of its pages (the caller's mistake, passed on as such).
    if (res.status === 400) throw new AppError(400, "invalid-parameter", "The query parameter cursor must be the nextCursor of a previous page of this list.", { parameter: "cursor" });
    if (res.status === 401) throw unavailable("it does not accept this admin-api's ADMIN_TOKEN: set the same ADMIN_TOKEN on both");
    throw unavailable(`it answered ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}`);
  }
}
