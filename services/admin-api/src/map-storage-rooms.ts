import type { RoomListPage } from "@vw/contracts";
import { AppError } from "@vw/service-kit";
import got, { type Response } from "got";

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
 * Over got, the stack's client for calls between our own services: a listing is a read, so one
 * dropped connection (a map-storage replica rolling over) is retried once before the 503.
 */
export class MapStorageRooms {
  constructor(private readonly options: MapStorageRoomsOptions) {}

  async list(org: string, world: string, limit: number, cursor: string | undefined): Promise<RoomListPage> {
    const url = new URL(`${this.options.baseUrl}/${org}/${world}/rooms`);
    url.searchParams.set("limit", String(limit));
    if (cursor !== undefined) url.searchParams.set("cursor", cursor);
    let res: Response<string>;
    try {
      res = await got(url, {
        headers: { authorization: `Bearer ${this.options.adminToken}` },
        timeout: { request: this.options.timeoutMs },
        retry: { limit: 1, methods: ["GET"], statusCodes: [], errorCodes: ["ECONNRESET", "ECONNREFUSED", "EPIPE"] },
        throwHttpErrors: false,
        followRedirect: false,
        responseType: "text",
      });
    } catch (err) {
      throw unavailable((err as Error).name === "TimeoutError" ? `no answer within ${this.options.timeoutMs} ms` : "unreachable");
    }
    if (res.statusCode === 200) {
      try {
        return JSON.parse(res.body) as RoomListPage;
      } catch {
        throw unavailable("it answered 200 with a body that is not JSON");
      }
    }
    const text = res.body;
    // Its own 400: a cursor that is not one of its pages (the caller's mistake, passed on as such).
    if (res.statusCode === 400) throw new AppError(400, "invalid-parameter", "The query parameter cursor must be the nextCursor of a previous page of this list.", { parameter: "cursor" });
    if (res.statusCode === 401) throw unavailable("it does not accept this admin-api's ADMIN_TOKEN: set the same ADMIN_TOKEN on both");
    throw unavailable(`it answered ${res.statusCode}${text ? `: ${text.slice(0, 200)}` : ""}`);
  }
}
