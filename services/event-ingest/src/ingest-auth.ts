import { createHash, timingSafeEqual } from "node:crypto";
import type { RequestHandler } from "express";
import { AppError } from "@vw/service-kit";

const REALM = 'Bearer realm="event-ingest"';

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

/**
 * Requires `Authorization: Bearer <INGEST_TOKEN>`. Both sides are hashed before a constant-time
 * comparison, so neither the content nor the length of the token leaks through timing.
 * Failures are 401 with `WWW-Authenticate` (RFC 6750); the presented token is never logged.
 */
export function ingestAuth(ingestToken: string): RequestHandler {
  const expected = digest(ingestToken);
  return (req, _res, next) => {
    const header = req.headers.authorization;
    const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
    if (!match?.[1]) {
      throw new AppError(
        401,
        "unauthorized",
        header === undefined
          ? "This endpoint needs 'Authorization: Bearer <INGEST_TOKEN>'."
          : "The Authorization header must have the form 'Bearer <INGEST_TOKEN>'.",
        { headers: { "WWW-Authenticate": header === undefined ? REALM : `${REALM}, error="invalid_request"` } },
      );
    }
    if (!timingSafeEqual(digest(match[1]), expected)) {
      throw new AppError(401, "invalid-token", "The bearer token is not the ingest token.", {
        headers: { "WWW-Authenticate": `${REALM}, error="invalid_token"` },
      });
    }
    next();
  };
}
