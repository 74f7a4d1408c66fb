import type { Request, RequestHandler } from "express";
import { AppError, badRequest, jsonBody as readJsonBody } from "@vw/service-kit";
import type { ValidationResult } from "@vw/contracts";

/**
 * JSON request bodies of POST, PUT and PATCH under the platform's rules (service-kit `jsonBody`:
 * UTF-8 only, nesting limit, platform text); a body in another media type is 415. A request
 * without a body leaves `req.body` undefined.
 */
export function jsonBody(limit = "64kb"): RequestHandler[] {
  return readJsonBody({
    limit,
    acceptHeaders: { "Accept-Post": "application/json", "Accept-Patch": "application/json, application/merge-patch+json" },
  });
}

/** Returns the validated body, or throws a 400 listing every invalid member as a JSON pointer. */
export function validBody<T>(validate: (data: unknown) => ValidationResult<T>, body: unknown): T {
  const result = validate(body);
  if (!result.ok) {
    throw badRequest("invalid-request", "The request body is not valid; see `errors` for each invalid member.", result.errors);
  }
  return result.value;
}

/** 405 with `Allow` for a known path used with another method. */
export function methodNotAllowed(allowed: string[]): RequestHandler {
  return (req) => {
    throw new AppError(405, "method-not-allowed", `${req.method} is not supported here; use ${allowed.join(" or ")}.`, {
      headers: { Allow: allowed.join(", ") },
    });
  };
}

/** Largest and default page sizes of list endpoints. */
export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 50;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a UUID in its canonical text form; other ids cannot exist, so they are 404 without a query. */
export const isUuid = (value: string) => UUID_RE.test(value);

/** A page request: `?limit=1..100` and `?cursor=` (the `nextCursor` of the previous page). */
export interface PageRequest {
  limit: number;
  cursor: string | undefined;
}

/** Reads `limit` and `cursor` from the query string; 400 names the bad parameter. */
export function pageRequest(req: Request): PageRequest {
  const { limit: rawLimit, cursor } = req.query;
  let limit = DEFAULT_PAGE_SIZE;
  if (rawLimit !== undefined) {
    if (typeof rawLimit !== "string" || !/^\d{1,3}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > MAX_PAGE_SIZE) {
      throw new AppError(400, "invalid-parameter", `The query parameter limit must be an integer from 1 to ${MAX_PAGE_SIZE}.`, { parameter: "limit" });
    }
    limit = Number(rawLimit);
  }
  if (cursor !== undefined && (typeof cursor !== "string" || !isUuid(cursor))) {
    throw new AppError(400, "invalid-parameter", "The query parameter cursor must be the nextCursor of a previous page.", { parameter: "cursor" });
  }
  return { limit, cursor };
}

/** Prisma arguments of one keyset page: one extra row tells whether another page follows. */
export function pageArgs(page: PageRequest): { take: number; skip?: number; cursor?: { id: string } } {
  return page.cursor === undefined ? { take: page.limit + 1 } : { take: page.limit + 1, cursor: { id: page.cursor }, skip: 1 };
}

/** Cuts the extra row fetched by {@link pageArgs} and derives `nextCursor`. */
export function toPage<T extends { id: string }, R>(rows: T[], page: PageRequest, map: (row: T) => R) {
  const items = rows.slice(0, page.limit);
  const last = items.at(-1);
  return { items: items.map(map), nextCursor: rows.length > page.limit && last ? last.id : null };
}
