/**
 * The dashboard's one HTTP helper. Every call goes to the page's own origin (admin-api serves
 * both the page and the API), with the session cookie; a non-2xx answer becomes an
 * {@link ApiError} carrying the RFC 9457 problem document, so screens show its `detail` and put
 * its `errors[]` on their fields.
 */
import type { FieldError } from "@vw/contracts";

/** An RFC 9457 problem document as admin-api writes it. */
export interface Problem {
  type?: string;
  title?: string;
  status: number;
  detail?: string;
  errors?: FieldError[];
}

/** A failed API call: its status and problem document (or one made up for a non-problem answer). */
export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail ?? problem.title ?? `Request failed with status ${problem.status}`);
    this.name = "ApiError";
  }
  get status(): number {
    return this.problem.status;
  }
  /** The field errors whose JSON pointer starts with `pointer` (`/url`, `/subscriptions`...). */
  fieldErrors(pointer: string): string[] {
    return (this.problem.errors ?? [])
      .filter((e) => e.pointer === pointer || e.pointer.startsWith(`${pointer}/`))
      .map((e) => e.detail);
  }
}

const sessionLostListeners = new Set<(error: ApiError) => void>();

/**
 * Calls `listener` when an API call answers 401: the session ended (expired, signed out
 * elsewhere, revoked by the platform) while the page was open. Returns the unsubscribe function.
 */
export function onSessionLost(listener: (error: ApiError) => void): () => void {
  sessionLostListeners.add(listener);
  return () => sessionLostListeners.delete(listener);
}

/** The last path segment of a problem's `type` (`/problems/dashboard-link-used` → `dashboard-link-used`). */
export function problemCode(error: unknown): string | null {
  const type = error instanceof ApiError ? error.problem.type : undefined;
  return type ? (type.split("/").pop() ?? null) : null;
}

/** Message shown for a network failure (server down, connection cut). */
const NETWORK_DETAIL = "The dashboard could not reach the server. Check your connection and try again.";

/**
 * Calls `path` on this origin. JSON body in, parsed JSON out (`undefined` for 204).
 * Throws {@link ApiError} for any answer outside 2xx, and for a network failure (status 0).
 */
export async function apiRequest<T>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: { accept: "application/json, application/problem+json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { ...init.headers, "content-type": "application/json" };
  }
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch {
    throw new ApiError({ status: 0, title: "Network error", detail: NETWORK_DETAIL });
  }
  const text = await res.text();
  let parsed: unknown;
  if (text !== "") {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
  }
  if (!res.ok) {
    const problem = (parsed && typeof parsed === "object" ? parsed : {}) as Partial<Problem>;
    const error = new ApiError({
      ...problem,
      status: res.status,
      detail: problem.detail ?? problem.title ?? `The server answered ${res.status} ${res.statusText}.`,
    });
    if (res.status === 401 && path.startsWith("/admin/")) sessionLostListeners.forEach((l) => l(error));
    throw error;
  }
  return parsed as T;
}

/** Fetches a same-origin JSON document that is not under the API prefix (`/openapi.json`). */
export const getJson = <T>(path: string): Promise<T> => apiRequest<T>("GET", path);
