/** What every admin-api operation shares: its security schemes, default problems and headers. */
import { mergeProblems, operation, type JsonObject, type OperationSpec, type ProblemMap } from "./document-kit.js";
import { ALWAYS_PROBLEMS } from "./service-routes.js";

/** The admin API's prefix. */
export const ADMIN_API_BASE_PATH = "/admin/v1";

/** Security scheme of `Authorization: Bearer <ADMIN_TOKEN>`. */
export const ADMIN_TOKEN_SCHEME = "adminToken";

/** Security scheme of the dashboard's session cookie (routes of the session's own world). */
export const DASHBOARD_SESSION_SCHEME = "dashboardSession";

/**
 * Problems of every authenticated admin route: either credential can be sent, and a session that
 * is over, reaches outside its world or lacks the capability or the dashboard's `Origin` is refused.
 */
export const ADMIN_PROBLEMS: ProblemMap = mergeProblems(ALWAYS_PROBLEMS, {
  // Every /admin/v1 route reads a body sent with POST, PUT or PATCH, even one it ignores.
  400: ["invalid-request", "malformed-json", "too-deeply-nested"],
  413: ["payload-too-large"],
  415: ["unsupported-media-type", "unsupported-encoding"],
  401: ["missing-token", "invalid-token", "dashboard-session-expired"],
  403: ["forbidden", "missing-capability", "cross-origin-request"],
  429: ["too-many-failed-attempts"],
  503: ["dependency-unavailable"],
});

/** Problems of every admin route that reads a JSON body. */
export const ADMIN_BODY_PROBLEMS: ProblemMap = {
  400: ["invalid-request", "malformed-json", "too-deeply-nested", "bad-request"],
  413: ["payload-too-large"],
  415: ["unsupported-media-type", "unsupported-encoding"],
};

/** Problems of a list (its `limit` and `cursor`). */
export const LIST_PROBLEMS: ProblemMap = { 400: ["invalid-parameter"] };
/** A missing organization, world, key, endpoint or delivery. */
export const NOT_FOUND: ProblemMap = { 404: ["not-found"] };

/** An authenticated admin operation: the admin problems merged in, plus the body ones when it has a body. */
export function adminOperation(spec: Omit<OperationSpec, "security">): JsonObject {
  const defaults = spec.requestBody ? mergeProblems(ADMIN_PROBLEMS, ADMIN_BODY_PROBLEMS) : ADMIN_PROBLEMS;
  return operation({ ...spec, security: ADMIN_TOKEN_SCHEME }, defaults);
}

/** `Location` of a created resource. */
export const locationHeader = (what: string): JsonObject => ({ Location: { description: `Path of the ${what}.`, schema: { type: "string" } } });
/** `Cache-Control: no-store` of an answer carrying a secret. */
export const noStore: JsonObject = { "Cache-Control": { description: "`no-store`: the answer carries a secret.", schema: { type: "string" } } };
