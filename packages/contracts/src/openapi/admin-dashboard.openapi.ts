/** The dashboard's own routes on admin-api: its session API (cookie) and the page. */
import { ALWAYS_PROBLEMS } from "./service-routes.js";
import { emptyResponse, jsonRequestBody, jsonResponse, mergeProblems, operation, parameterRef, schemaRef, type JsonObject } from "./document-kit.js";
import { ADMIN_BODY_PROBLEMS, DASHBOARD_SESSION_SCHEME } from "./admin-common.openapi.js";

/** The dashboard's own routes: its session API (cookie) and the page. */
export function dashboardPaths(): Record<string, Record<string, JsonObject>> {
  const sessionProblems = mergeProblems(ALWAYS_PROBLEMS, { 503: ["dependency-unavailable"] });
  const page = (description: string): JsonObject => ({ description, content: { "text/html": { schema: { type: "string" } } } });
  const tags = ["dashboard"];
  const cookie = { "Set-Cookie": { description: "The session cookie (HttpOnly, SameSite, Secure over https).", schema: { type: "string" } } };
  return {
    "/dashboard/api/session": {
      post: operation(
        {
          operationId: "openDashboardSession",
          summary: "Exchange a dashboard link's one-time code for the session cookie",
          description: "Only from the dashboard's own origin (`Origin` must be PUBLIC_ADMIN_URL's): a page elsewhere cannot sign a visitor in.",
          tags,
          security: null,
          requestBody: jsonRequestBody(schemaRef("ExchangeDashboardCodeRequest")),
          responses: { "200": jsonResponse("The session; the cookie is set.", schemaRef("DashboardSession"), cookie) },
          problems: mergeProblems(ADMIN_BODY_PROBLEMS, {
            401: ["dashboard-link-invalid"],
            403: ["cross-origin-request"],
            410: ["dashboard-link-used", "dashboard-link-expired"],
            429: ["too-many-failed-attempts"],
          }),
        },
        sessionProblems,
      ),
      get: operation(
        {
          operationId: "getDashboardSession",
          summary: "The current dashboard session",
          tags,
          security: DASHBOARD_SESSION_SCHEME,
          responses: { "200": jsonResponse("The session.", schemaRef("DashboardSession")) },
          problems: { 401: ["dashboard-session-required", "dashboard-session-expired"] },
        },
        sessionProblems,
      ),
      delete: operation(
        {
          operationId: "closeDashboardSession",
          summary: "Sign out: end the session and clear the cookie",
          tags,
          security: DASHBOARD_SESSION_SCHEME,
          responses: { "204": emptyResponse("Signed out.", cookie) },
          problems: { 403: ["cross-origin-request"] },
        },
        sessionProblems,
      ),
    },
    "/dashboard": {
      get: operation(
        {
          operationId: "dashboardRedirect",
          summary: "Redirects to /dashboard/",
          tags,
          security: null,
          responses: {
            "301": {
              description: "To `/dashboard/` (the query is kept), with express's short text body.",
              headers: { Location: { schema: { type: "string" } } },
              content: { "text/*": { schema: { type: "string" } } },
            },
          },
        },
        ALWAYS_PROBLEMS,
      ),
    },
    "/dashboard/": {
      get: operation(
        { operationId: "dashboardPage", summary: "The dashboard page", tags, security: null, responses: { "200": page("The page.") }, problems: { 404: ["not-found"] } },
        ALWAYS_PROBLEMS,
      ),
    },
    "/dashboard/{asset}": {
      get: operation(
        {
          operationId: "dashboardAsset",
          summary: "A file of the dashboard, or the page for its own routes (paths without an extension)",
          tags,
          security: null,
          parameters: [parameterRef("DashboardAsset")],
          responses: { "200": { description: "The file or the page.", content: { "*/*": { schema: {} } } } },
          problems: { 404: ["not-found"] },
        },
        ALWAYS_PROBLEMS,
      ),
    },
  };
}

/** Paths of the document served by middleware (static files) rather than by express routes. */
export const ADMIN_MIDDLEWARE_PATHS = ["/dashboard", "/dashboard/", "/dashboard/{asset}"];
