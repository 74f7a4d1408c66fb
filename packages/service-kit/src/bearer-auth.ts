import { createHash, timingSafeEqual } from "node:crypto";
import type { Request, RequestHandler } from "express";
import { clientAddress, type AuthThrottle } from "./auth-throttle.js";
import { AppError } from "./errors.js";

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

/** What {@link bearerAuth} checks and how it names things in its answers. */
export interface BearerAuthOptions {
  /** The one accepted token (ADMIN_TOKEN, INGEST_TOKEN…). */
  token: string;
  /** `realm` of `WWW-Authenticate`: the service name. */
  realm: string;
  /** The variable holding the token, named in error details (`ADMIN_TOKEN`). */
  variable: string;
  /** What the token is, for "The bearer token is not the <label>." */
  label: string;
  /** Counts wrong tokens per client and refuses throttled clients (429); none: never throttled. */
  throttle?: AuthThrottle;
}

/**
 * Requires `Authorization: Bearer <token>` for a service-wide static token. Both sides are hashed
 * before a constant-time comparison, so neither the content nor the length of the token leaks
 * through timing. Failures are 401 with `WWW-Authenticate` (RFC 6750); the presented token is
 * never logged. With a `throttle`, a client that failed too often gets 429 whatever it sends.
 */
export function bearerAuth({ token, realm, variable, label, throttle }: BearerAuthOptions): RequestHandler {
  const expected = digest(token);
  const challenge = `Bearer realm="${realm}"`;
  const check = (req: Request): void => {
    const header = req.headers.authorization;
    const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
    if (!match?.[1]) {
      // The same codes as map-storage's API keys: no header is `missing-token`, a header that is not
      // `Bearer <token>` is `invalid-token` (with RFC 6750's `invalid_request`).
      throw new AppError(
        401,
        header === undefined ? "missing-token" : "invalid-token",
        header === undefined
          ? `This endpoint needs 'Authorization: Bearer <${variable}>'.`
          : `The Authorization header must have the form 'Bearer <${variable}>'.`,
        { headers: { "WWW-Authenticate": header === undefined ? challenge : `${challenge}, error="invalid_request"` } },
      );
    }
    if (!timingSafeEqual(digest(match[1]), expected)) {
      throw new AppError(401, "invalid-token", `The bearer token is not the ${label}.`, {
        headers: { "WWW-Authenticate": `${challenge}, error="invalid_token"` },
      });
    }
  };
  if (throttle === undefined) {
    return (req, _res, next) => {
      check(req);
      next();
    };
  }
  return async (req, _res, next) => {
    await throttle.guard(clientAddress(req), () => check(req), undefined, req.headers.authorization);
    next();
  };
}
