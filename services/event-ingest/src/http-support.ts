import type { RequestHandler } from "express";
import { AppError, jsonBody as readJsonBody } from "@vw/service-kit";

/** Largest request body: 500 events of about 10 KiB each. */
export const DEFAULT_BODY_LIMIT = "5mb";

/**
 * JSON request bodies under the platform's rules (service-kit `jsonBody`: UTF-8 only, nesting
 * limit, platform text): a body in another media type is 415, malformed JSON 400 and an
 * oversized one 413. A request without a body leaves `req.body` undefined, which the route then
 * refuses as a missing body.
 */
export function jsonBody(limit: string | number = DEFAULT_BODY_LIMIT): RequestHandler[] {
  return readJsonBody({ limit, acceptHeaders: { "Accept-Post": "application/json" } });
}

/** 405 with `Allow` for a known path used with another method. */
export function methodNotAllowed(allowed: string[]): RequestHandler {
  return (req) => {
    throw new AppError(405, "method-not-allowed", `${req.method} is not supported here; use ${allowed.join(" or ")}.`, {
      headers: { Allow: allowed.join(", ") },
    });
  };
}
