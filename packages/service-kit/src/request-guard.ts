import type { RequestHandler } from "express";
import { unsafeTextReason } from "@vw/contracts";
import { AppError } from "./errors.js";

/**
 * Refuses a request whose path segments or query parameters, once percent-decoded, hold text the
 * platform does not accept (a NUL or a lone surrogate, see `@vw/contracts` json-safety): 400
 * naming the segment or parameter, before any route can hand it to PostgreSQL (which refuses NUL
 * with an error that would otherwise be a 500). A segment that does not percent-decode to UTF-8
 * (`%zz`, `%ff`) is refused the same way, whether or not a route would match it.
 */
export const requestTextGuard: RequestHandler = (req, _res, next) => {
  const segments = req.path.split("/");
  for (let i = 1; i < segments.length; i++) {
    const raw = segments[i]!;
    if (!raw.includes("%")) continue;
    const refuse = (what: string) => {
      const detail = `Path segment ${i} ('${raw.slice(0, 80)}') ${what}.`;
      return new AppError(400, "invalid-path", detail, { parameter: `path segment ${i}`, errors: [{ pointer: "", detail }] });
    };
    let decoded: string;
    try {
      decoded = decodeURIComponent(raw);
    } catch {
      throw refuse("is not valid percent-encoded UTF-8");
    }
    const reason = unsafeTextReason(decoded);
    if (reason) throw refuse(reason);
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
