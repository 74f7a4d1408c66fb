import express, { type RequestHandler } from "express";
import { AppError } from "@vw/service-kit";

const JSON_TYPES = ["application/json", "application/*+json"];

/** Largest request body: 500 events of about 10 KiB each. */
export const DEFAULT_BODY_LIMIT = "5mb";

/**
 * JSON request bodies: a body in another media type is 415, malformed JSON 400 and an oversized
 * one 413 (through the service-kit error middleware). A request without a body leaves
 * `req.body` undefined, which the route then refuses as a missing body.
 */
export function jsonBody(limit: string | number = DEFAULT_BODY_LIMIT): RequestHandler[] {
  const requireJson: RequestHandler = (req, _res, next) => {
    // An empty body (`Content-Length: 0`, what fetch sends for a bodyless POST) is no body.
    const hasBody = req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] ?? "0") !== "0";
    if ((req.method === "POST" || req.method === "PUT") && hasBody && !req.is(JSON_TYPES)) {
      throw new AppError(415, "unsupported-media-type", `Send the request body as application/json, not ${req.headers["content-type"] ?? "an untyped body"}.`, {
        headers: { "Accept-Post": "application/json" },
      });
    }
    next();
  };
  return [requireJson, express.json({ limit, type: JSON_TYPES, strict: true })];
}

/** 405 with `Allow` for a known path used with another method. */
export function methodNotAllowed(allowed: string[]): RequestHandler {
  return (req) => {
    throw new AppError(405, "method-not-allowed", `${req.method} is not supported here; use ${allowed.join(" or ")}.`, {
      headers: { Allow: allowed.join(", ") },
    });
  };
}
