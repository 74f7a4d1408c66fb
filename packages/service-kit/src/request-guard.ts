import type { RequestHandler } from "express";
import { unsafeTextReason } from "@vw/contracts";
import { AppError } from "./errors.js";

/**
 * Refuses a request whose path segments or query parameters, once percent-decoded, hold text the
 * platform does not accept (a NUL or a lone surrogate, see `@vw/contracts` json-safety): 400
 * naming the segment or parameter, before any route can hand it to PostgreSQL (which refuses NUL
 * with an error that would otherwise be a 500). A segment that does not decode is left to the
 * routes, which answer it as they already do (400 or 404).
 */
export const requestTextGuard: RequestHandler = (req, _res, next) => {
  const segments = req.path.split("/");
  for (let i = 1; i < segments.length; i++) {
    const raw = segments[i]!;
    if (!raw.includes("%")) continue;
    let decoded: string;
    try {
      decoded = decodeURIComponent(raw);
    } catch {
      continue;
    }
    const reason = unsafeTextReason(decoded);
    if (reason) {
      const detail = `Path segment ${i} ('${raw.slice(0, 80)}') ${reason}.`;
      throw new AppError(400, "invalid-path", detail, { parameter: `path segment ${i}`, errors: [{ pointer: "", detail }] });
    }
  }
  const query = req.query as Record<string, unknown>;
  for (const [name, value] of Object.entries(query)) {
    for (const text of [name, ...(Array.isArray(value) ? value : [value])]) {
      if (typeof text !== "string") continue;
      const reason = unsafeTextReason(text);
      if (reason) {
        throw new AppError(400, "invalid-parameter", `The query parameter '${name.slice(0, 80)}' ${text === name ? "name " : ""}${reason}.`, {
          parameter: name,
        });
      }
    }
  }
  next();
};
