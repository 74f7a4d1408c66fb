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
  /** The decoded cursor: the sort key and id of the previous page's last row. */
  after: PageCursor | undefined;
}

/**
 * Where the previous page ended: the last row's sort key (`s`: a slug; `t`: a creation time) and
 * id. Keyset pagination on the sort key itself, so a page still follows when that row has been
 * deleted meanwhile (a cursor naming only the row's id would end the listing early).
 */
export interface PageCursor {
  kind: "s" | "t";
  key: string;
  id: string;
}

const CURSOR_RE = /^[A-Za-z0-9_-]{1,512}$/;

/** The opaque `nextCursor` text of a cursor: base64url of `[kind, key, id]`. */
export function encodeCursor(cursor: PageCursor): string {
  return Buffer.from(JSON.stringify([cursor.kind, cursor.key, cursor.id])).toString("base64url");
}

function decodeCursor(text: string): PageCursor | null {
  if (!CURSOR_RE.test(text)) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
    if (!Array.isArray(value) || value.length !== 3) return null;
    const [kind, key, id] = value as unknown[];
    // Slugs and ISO times are printable ASCII: nothing else (a NUL, say) ever reaches a query.
    if ((kind !== "s" && kind !== "t") || typeof key !== "string" || !/^[\x20-\x7e]{1,200}$/.test(key) || typeof id !== "string" || !isUuid(id)) return null;
    if (kind === "t" && Number.isNaN(Date.parse(key))) return null;
    return { kind, key, id };
  } catch {
    return null;
  }
}

/** The 400 of a cursor that is not a `nextCursor` of the list asked for. */
export const badCursor = () => new AppError(400, "invalid-parameter", "The query parameter cursor must be the nextCursor of a previous page of this list.", { parameter: "cursor" });

/** `?limit=`: 1..100, 50 by default; 400 otherwise. */
export function limitOf(req: Request): number {
  const rawLimit = req.query.limit;
  if (rawLimit === undefined) return DEFAULT_PAGE_SIZE;
  if (typeof rawLimit !== "string" || !/^\d{1,3}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > MAX_PAGE_SIZE) {
    throw new AppError(400, "invalid-parameter", `The query parameter limit must be an integer from 1 to ${MAX_PAGE_SIZE}.`, { parameter: "limit" });
  }
  return Number(rawLimit);
}

/** Reads `limit` and `cursor` (an opaque {@link PageCursor}) from the query string; 400 names the bad parameter. */
export function pageRequest(req: Request): PageRequest {
  const limit = limitOf(req);
  const { cursor } = req.query;
  if (cursor === undefined) return { limit, cursor: undefined, after: undefined };
  const after = typeof cursor === "string" ? decodeCursor(cursor) : null;
  if (after === null) throw badCursor();
  return { limit, cursor: cursor as string, after };
}

/**
 * {@link pageRequest} of a list whose cursor is the last row's id, a UUIDv7 (time-ordered, and
 * removed only by retention): the delivery history, which reads the cursor row's time itself.
 */
export function idPageRequest(req: Request): PageRequest {
  const limit = limitOf(req);
  const { cursor } = req.query;
  if (cursor !== undefined && (typeof cursor !== "string" || !isUuid(cursor))) throw badCursor();
  return { limit, cursor: cursor as string | undefined, after: undefined };
}

/** The page's cursor, which must be of `kind` (a cursor of a list ordered otherwise is a 400). */
function afterOf(page: PageRequest, kind: PageCursor["kind"]): PageCursor | undefined {
  if (page.after !== undefined && page.after.kind !== kind) throw badCursor();
  return page.after;
}

/**
 * Prisma arguments of a page of a list ordered by slug (unique within the list): the rows after
 * the cursor's slug, and one extra row that tells whether another page follows. Merge `where`
 * with the list's own filter.
 */
export function slugPage(page: PageRequest): { take: number; where: { slug?: { gt: string } } } {
  const after = afterOf(page, "s");
  return { take: page.limit + 1, where: after ? { slug: { gt: after.key } } : {} };
}

/** {@link slugPage} for a list ordered newest first by `(createdAt, id)`. */
export function newestPage(page: PageRequest): {
  take: number;
  where: { OR?: [{ createdAt: { lt: Date } }, { createdAt: Date; id: { lt: string } }] };
} {
  const after = afterOf(page, "t");
  if (!after) return { take: page.limit + 1, where: {} };
  const at = new Date(after.key);
  return { take: page.limit + 1, where: { OR: [{ createdAt: { lt: at } }, { createdAt: at, id: { lt: after.id } }] } };
}

/** Where a page of a list ordered by slug ends (see {@link slugPage}). */
export const slugCursor = (row: { slug: string; id: string }): PageCursor => ({ kind: "s", key: row.slug, id: row.id });

/** Where a page of a list ordered newest first ends (see {@link newestPage}). */
export const newestCursor = (row: { createdAt: Date; id: string }): PageCursor => ({ kind: "t", key: row.createdAt.toISOString(), id: row.id });

/** Cuts the extra row fetched by {@link slugPage} or {@link newestPage} and derives `nextCursor` from the last row kept. */
export function toPage<T, R>(rows: T[], page: PageRequest, cursorOf: (row: T) => PageCursor, map: (row: T) => R) {
  const items = rows.slice(0, page.limit);
  const last = items.at(-1);
  return { items: items.map(map), nextCursor: rows.length > page.limit && last !== undefined ? encodeCursor(cursorOf(last)) : null };
}
