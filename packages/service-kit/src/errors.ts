import type { ProblemCode } from "@vw/contracts";

/** One invalid field of a request: a JSON pointer into the request and what is wrong there. */
export interface FieldError {
  pointer: string;
  detail: string;
}

/**
 * An expected failure with its HTTP status. The error middleware renders it as
 * `application/problem+json` (RFC 9457) with `type` `/problems/<code>`; `code` is one of the
 * catalogue of problem types in `@vw/contracts` (add a new one there, with its summary).
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: ProblemCode,
    readonly detail: string,
    readonly extras: { errors?: FieldError[]; headers?: Record<string, string>; [k: string]: unknown } = {},
  ) {
    super(detail);
    this.name = "AppError";
  }
}

export const badRequest = (code: ProblemCode, detail: string, errors?: FieldError[]) =>
  new AppError(400, code, detail, errors ? { errors } : {});
export const notFound = (detail: string) => new AppError(404, "not-found", detail);
export const conflict = (code: ProblemCode, detail: string) => new AppError(409, code, detail);
export const unprocessable = (code: ProblemCode, detail: string, errors?: FieldError[]) =>
  new AppError(422, code, detail, errors ? { errors } : {});

/** Titles for the statuses this project emits; RFC 9457 says `title` is the same for every occurrence. */
export const STATUS_TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  409: "Conflict",
  410: "Gone",
  412: "Precondition Failed",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Content",
  428: "Precondition Required",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/** Encodes a JSON pointer reference token (RFC 6901). */
export function pointerToken(s: string | number): string {
  return String(s).replace(/~/g, "~0").replace(/\//g, "~1");
}
