import express, { type RequestHandler } from "express";
import { MAX_JSON_DEPTH, checkJsonValue, jsonTextDepth } from "@vw/contracts";
import { AppError } from "./errors.js";

/** Media types read as JSON bodies. */
export const JSON_MEDIA_TYPES = ["application/json", "application/*+json"];

/** Options of {@link jsonBody}. */
export interface JsonBodyOptions {
  /** Largest body, in bytes or as a size such as "64kb". */
  limit: string | number;
  /** Methods whose body is read (others leave `req.body` undefined). POST, PUT and PATCH by default. */
  methods?: readonly string[];
  /** Extra headers of the 415 answer, such as `Accept-Post` and `Accept-Patch`. */
  acceptHeaders?: Record<string, string>;
}

const UTF8 = /^utf-?8$/i;
const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The one JSON body reader of the platform: only UTF-8 JSON (RFC 8259) is accepted.
 * - a body in another media type: 415; a `charset` other than UTF-8: 415 (it is never guessed or
 *   transcoded, so a UTF-16 body cannot silently become `{}`); bytes that are not UTF-8: 400;
 * - nesting deeper than `MAX_JSON_DEPTH`: 400, measured on the text before it is parsed;
 * - malformed JSON, or a top level that is not an object or an array: 400;
 * - a string or member name holding a NUL or a lone surrogate: 400 with a JSON pointer to each;
 * - larger than `limit`: 413 (through the error middleware).
 * A request without a body (none, or `Content-Length: 0`) leaves `req.body` undefined. On a method
 * outside `methods` a JSON-typed body is checked (malformed: 400) and then dropped; others are ignored.
 */
export function jsonBody(options: JsonBodyOptions): RequestHandler[] {
  const methods = new Set(options.methods ?? ["POST", "PUT", "PATCH"]);
  const readRaw = express.raw({ type: () => true, limit: options.limit });
  const gate: RequestHandler = (req, _res, next) => {
    const hasBody = req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] ?? "0") !== "0";
    if (!hasBody) {
      next();
      return;
    }
    if (!methods.has(req.method)) {
      // A route that takes no body (DELETE, say) ignores one, but not a body that claims to be
      // JSON and is not: that request is malformed, and acting on it would hide the client's bug.
      if (req.is(JSON_MEDIA_TYPES)) readRaw(req, _res, next);
      else next();
      return;
    }
    if (!req.is(JSON_MEDIA_TYPES)) {
      throw new AppError(415, "unsupported-media-type", `Send the request body as application/json, not ${req.headers["content-type"] ?? "an untyped body"}.`, {
        headers: options.acceptHeaders ?? {},
      });
    }
    assertUtf8Charset(req.headers["content-type"], options.acceptHeaders);
    readRaw(req, _res, next);
  };
  const parse: RequestHandler = (req, _res, next) => {
    if (!Buffer.isBuffer(req.body)) {
      req.body = undefined;
      next();
      return;
    }
    const raw: Buffer = req.body;
    req.body = undefined;
    if (raw.length === 0) {
      next();
      return;
    }
    const parsed = parseJsonBytes(raw);
    // Checked, then dropped, on a method that takes no body (see the gate).
    if (methods.has(req.method)) req.body = parsed;
    next();
  };
  return [gate, parse];
}

/**
 * Refuses (415) a `Content-Type` whose `charset` parameter is not UTF-8: JSON is UTF-8 only
 * (RFC 8259), and a body is never transcoded. No charset parameter is UTF-8.
 */
export function assertUtf8Charset(contentType: string | undefined, acceptHeaders: Record<string, string> = {}): void {
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType ?? "")?.[1];
  if (charset !== undefined && !UTF8.test(charset)) {
    throw new AppError(415, "unsupported-media-type", `JSON is accepted in UTF-8 only (RFC 8259), not charset '${charset.slice(0, 40)}'.`, {
      headers: acceptHeaders,
    });
  }
}

/**
 * Decodes and parses a UTF-8 JSON document under the platform's rules (see {@link jsonBody}),
 * throwing the 400 that names what is wrong. `what` names the document in messages.
 * A top level that is not an object or an array is refused unless `anyTopLevel`.
 */
export function parseJsonBytes(raw: Buffer, what = "The request body", anyTopLevel = false): unknown {
  let text: string;
  try {
    text = fatalUtf8.decode(raw);
  } catch {
    throw new AppError(400, "malformed-json", `${what} is not valid UTF-8; JSON is accepted in UTF-8 only.`);
  }
  const depth = jsonTextDepth(text);
  if (depth > MAX_JSON_DEPTH) {
    throw new AppError(400, "too-deeply-nested", `${what} nests objects and arrays deeper than the limit of ${MAX_JSON_DEPTH} levels.`, {
      limit: MAX_JSON_DEPTH,
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new AppError(400, "malformed-json", `${what} is not valid JSON: ${(err as Error).message}`);
  }
  if (!anyTopLevel && (typeof value !== "object" || value === null)) {
    throw new AppError(400, "malformed-json", `${what} must be a JSON object or array.`);
  }
  const unsafe = checkJsonValue(value);
  if (unsafe.length > 0) {
    throw new AppError(400, "invalid-request", `${what} holds text the platform does not accept; see \`errors\`.`, { errors: unsafe });
  }
  return value;
}
