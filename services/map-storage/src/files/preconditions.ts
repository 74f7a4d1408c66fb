import { AppError } from "@vw/service-kit";

/** A parsed `If-Match` / `If-None-Match` header: `*` or a list of entity tags. */
export type EtagCondition = "*" | string[];

/** Parses an entity-tag list header (RFC 9110 §13.1); `undefined` when absent. */
export function parseEtagList(header: string | undefined): EtagCondition | undefined {
  if (header === undefined) return undefined;
  const h = header.trim();
  if (h === "") return undefined;
  if (h === "*") return "*";
  const tags = h.match(/(?:W\/)?"[^"]*"/g);
  if (!tags) {
    throw new AppError(400, "invalid-precondition", `'${h}' is not a list of quoted entity tags.`);
  }
  return tags;
}

const opaque = (tag: string) => (tag.startsWith("W/") ? tag.slice(2) : tag);

/** Weak comparison, as `If-None-Match` uses. */
export function matchesWeak(condition: EtagCondition, etag: string | null): boolean {
  if (etag === null) return false;
  if (condition === "*") return true;
  return condition.some((t) => opaque(t) === opaque(etag));
}

/** Strong comparison, as `If-Match` uses: weak tags never match. */
export function matchesStrong(condition: EtagCondition, etag: string | null): boolean {
  if (etag === null) return false;
  if (condition === "*") return true;
  return condition.some((t) => !t.startsWith("W/") && t === etag);
}

export interface WriteConditions {
  ifMatch?: EtagCondition;
  ifNoneMatch?: EtagCondition;
}

/** Throws 412 when the current state (ETag, or null when absent) fails the request's conditions. */
export function checkWriteConditions(current: string | null, c: WriteConditions): void {
  if (c.ifMatch !== undefined && !matchesStrong(c.ifMatch, current)) {
    throw new AppError(412, "precondition-failed", current === null
      ? "If-Match was given but the file does not exist."
      : `If-Match does not match the current ETag ${current}.`, current ? { headers: { ETag: current } } : {});
  }
  if (c.ifNoneMatch !== undefined && matchesWeak(c.ifNoneMatch, current)) {
    throw new AppError(412, "precondition-failed", c.ifNoneMatch === "*"
      ? "If-None-Match: * was given but the file already exists."
      : `If-None-Match matches the current ETag ${current}.`, current ? { headers: { ETag: current } } : {});
  }
}
