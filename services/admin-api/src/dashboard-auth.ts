import type { Request, RequestHandler, Response } from "express";
import { AppError, notFound, type AuthThrottle } from "@vw/service-kit";
import type { DashboardCapability, UpdateWorldRequest } from "@vw/contracts";
import { adminAuth } from "./admin-auth.js";
import type { AuthenticatedSession, DashboardSessionsService } from "./dashboard-sessions.service.js";

/**
 * How the session cookie is written. Over https it is `__Host-` prefixed (Secure, Path=/, no
 * Domain: no sibling host can set or shadow it). SameSite is Strict, except when the dashboard may
 * be embedded by other sites (DASHBOARD_FRAME_ANCESTORS) over https: a cookie in a cross-site
 * iframe is only sent as `SameSite=None`, and `Partitioned` (CHIPS) keeps it in the embedding
 * site's partition, which is also what browsers blocking third-party cookies still accept.
 * Over plain http it is neither Secure nor embeddable (local development).
 */
export interface SessionCookiePolicy {
  name: string;
  secure: boolean;
  sameSite: "Strict" | "None";
  partitioned: boolean;
}

/** Cookie name over https (`__Host-` prefix) and over http. */
export const SESSION_COOKIE_NAMES = { secure: "__Host-vw-dashboard", plain: "vw-dashboard" } as const;

/** Derives the cookie policy from PUBLIC_ADMIN_URL and DASHBOARD_FRAME_ANCESTORS. */
export function sessionCookiePolicy(publicAdminUrl: string, frameAncestors: readonly string[]): SessionCookiePolicy {
  const secure = new URL(publicAdminUrl).protocol === "https:";
  const embedded = secure && frameAncestors.length > 0;
  return {
    name: secure ? SESSION_COOKIE_NAMES.secure : SESSION_COOKIE_NAMES.plain,
    secure,
    sameSite: embedded ? "None" : "Strict",
    partitioned: embedded,
  };
}

/** `Set-Cookie` value carrying `token` until `expiresAt`, or clearing the cookie when `token` is null. */
export function sessionCookieHeader(policy: SessionCookiePolicy, token: string | null, expiresAt?: Date, now = new Date()): string {
  const maxAge = token === null || expiresAt === undefined ? 0 : Math.max(0, Math.floor((expiresAt.getTime() - now.getTime()) / 1000));
  const parts = [`${policy.name}=${token ?? ""}`, "Path=/", `Max-Age=${maxAge}`, "HttpOnly", `SameSite=${policy.sameSite}`];
  if (policy.secure) parts.push("Secure");
  if (policy.partitioned) parts.push("Partitioned");
  return parts.join("; ");
}

/** The value of cookie `name` in the request, if any (the last one wins, as the browser sends them). */
export function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (header === undefined) return undefined;
  let value: string | undefined;
  for (const pair of header.split(";")) {
    const eq = pair.indexOf("=");
    if (eq > 0 && pair.slice(0, eq).trim() === name) value = pair.slice(eq + 1).trim();
  }
  return value === "" ? undefined : value;
}

const SAFE_METHODS = new Set(["GET", "HEAD"]);

/**
 * CSRF defence of cookie-authenticated requests that change state: the browser always sends
 * `Origin` on them, and only the dashboard's own pages can make it equal to the dashboard's origin.
 * (SameSite alone is not enough once the cookie is `SameSite=None` for embedding.)
 */
export function requireDashboardOrigin(req: Request, dashboardOrigin: string): void {
  if (SAFE_METHODS.has(req.method)) return;
  const origin = req.headers.origin;
  if (origin !== dashboardOrigin) {
    throw new AppError(
      403,
      "cross-origin-request",
      origin === undefined
        ? `A dashboard session request that changes something must carry an Origin header equal to ${dashboardOrigin}.`
        : `A dashboard session request that changes something must come from ${dashboardOrigin}, not ${origin}.`,
    );
  }
}

/** What a session request on `/admin/v1` needs, from its path below `/worlds/{org}/{world}` and its method. */
function requiredCapability(method: string, rest: readonly string[]): DashboardCapability | "refused" {
  const reading = SAFE_METHODS.has(method);
  const [first] = rest;
  if (first === "dashboard-sessions") return "refused";
  if (reading) return "view";
  if (first === undefined) return "manage-endpoints"; // the world's settings (PATCH)
  if (first === "api-keys") return "manage-api-keys";
  if (first === "endpoints") {
    const action = rest[2];
    if (rest.length === 3 && (action === "test" || action === "recover")) return "send";
    if (rest.length === 5 && rest[2] === "deliveries" && rest[4] === "replay") return "send";
    return "manage-endpoints";
  }
  // A state-changing route this table does not know is not open to sessions until listed here.
  return "refused";
}

/**
 * Who may set each member of `PATCH /worlds/{org}/{world}`: a session with the capability named,
 * or the platform operator only (ADMIN_TOKEN). `adminEmails` receive the world's administrative
 * mail (endpoint disabled…), a `customDomain` is bound after the operator has verified the world
 * owns it, and `quotas` are the platform's limits: none is the world administrators' to set. A
 * member added to the request type must be placed here (the type requires every key).
 */
export const WORLD_SETTING_CAPABILITIES: Readonly<Record<keyof UpdateWorldRequest, DashboardCapability | "operator">> = Object.freeze({
  name: "manage-endpoints",
  analytics: "manage-endpoints",
  identityProviders: "manage-endpoints",
  adminEmails: "operator",
  customDomain: "operator",
  quotas: "operator",
});

/**
 * Refuses a world settings patch from a dashboard session that sends a member it may not set:
 * 403 `forbidden` naming each operator-only member (with a pointer), or 403 `missing-capability`.
 * Runs before the body is validated, so a session learns nothing about values it may not send.
 * Operator requests (no session) and members unknown here (the schema refuses them) pass.
 */
export function authorizeWorldPatch(session: AuthenticatedSession | undefined, body: unknown): void {
  if (session === undefined || typeof body !== "object" || body === null || Array.isArray(body)) return;
  const members = Object.keys(body).filter((key): key is keyof UpdateWorldRequest => Object.hasOwn(WORLD_SETTING_CAPABILITIES, key));
  const operatorOnly = members.filter((key) => WORLD_SETTING_CAPABILITIES[key] === "operator");
  if (operatorOnly.length > 0) {
    throw new AppError(403, "forbidden", `Only the platform operator (ADMIN_TOKEN) can set ${operatorOnly.join(", ")}; a dashboard session cannot.`, {
      errors: operatorOnly.map((key) => ({ pointer: `/${key}`, detail: "is set by the platform operator only (ADMIN_TOKEN)" })),
    });
  }
  for (const key of members) {
    const needed = WORLD_SETTING_CAPABILITIES[key] as DashboardCapability;
    if (!session.capabilities.includes(needed)) {
      throw new AppError(403, "missing-capability", `This dashboard session does not have the "${needed}" capability ${key} needs.`, { capability: needed });
    }
  }
}

const decodeSegment = (segment: string): string | null => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
};

/**
 * Whether `session` may make this `/admin/v1` request (path relative to `/admin/v1`): only below
 * its own `/worlds/{org}/{world}` (another world is a 404, exactly like a world that does not
 * exist, so a session learns nothing about other worlds), never an organization-level or
 * session-minting route (403), and with the capability the route needs (403 naming it).
 */
export function authorizeSession(session: AuthenticatedSession, method: string, path: string): void {
  const segments = path.split("/").slice(1);
  if (segments.at(-1) === "") segments.pop(); // `/worlds/o/w/` routes like `/worlds/o/w`
  if (segments[0] !== "worlds" || segments.length < 3) {
    throw new AppError(403, "forbidden", "A dashboard session can only reach the routes of its own world, under /admin/v1/worlds/{org}/{world}.");
  }
  const [org, world] = [decodeSegment(segments[1] ?? ""), decodeSegment(segments[2] ?? "")];
  if (org !== session.organization || world !== session.world) {
    throw notFound(`World "${org ?? segments[1]}/${world ?? segments[2]}" does not exist.`);
  }
  const needed = requiredCapability(method, segments.slice(3));
  if (needed === "refused") {
    throw new AppError(403, "forbidden", "This route is for the platform operator (ADMIN_TOKEN), not for dashboard sessions.");
  }
  if (!session.capabilities.includes(needed)) {
    throw new AppError(403, "missing-capability", `This dashboard session does not have the "${needed}" capability this action needs.`, {
      capability: needed,
    });
  }
}

/** Where the current request's session is kept for the handlers. */
export const sessionOf = (res: Response): AuthenticatedSession | undefined => res.locals.dashboardSession as AuthenticatedSession | undefined;

/** Dependencies of {@link adminOrSessionAuth}. */
export interface AdminOrSessionAuthOptions {
  adminToken: string;
  sessions: DashboardSessionsService;
  cookie: SessionCookiePolicy;
  /** Origin of PUBLIC_ADMIN_URL. */
  dashboardOrigin: string;
  /** Throttles wrong admin tokens per client. */
  throttle?: AuthThrottle;
}

/**
 * The two credentials of `/admin/v1` (one API, two callers): the operator's
 * `Authorization: Bearer <ADMIN_TOKEN>` (everything), or a dashboard session cookie (its own
 * world, its capabilities, CSRF-checked). A request with an Authorization header is judged on it
 * alone; one with neither gets the bearer challenge.
 */
export function adminOrSessionAuth(options: AdminOrSessionAuthOptions): RequestHandler {
  const bearer = adminAuth(options.adminToken, options.throttle);
  return async (req, res, next) => {
    const token = req.headers.authorization === undefined ? readCookie(req, options.cookie.name) : undefined;
    if (token === undefined) {
      await bearer(req, res, next);
      return;
    }
    const session = await options.sessions.authenticate(token);
    if (!session) {
      res.setHeader("Set-Cookie", sessionCookieHeader(options.cookie, null));
      throw new AppError(401, "dashboard-session-expired", "This dashboard session has ended (expired, signed out or revoked). Open a new dashboard link.");
    }
    requireDashboardOrigin(req, options.dashboardOrigin);
    authorizeSession(session, req.method, req.path);
    res.locals.dashboardSession = session;
    // Cookie-authenticated answers are one user's view of one world: no shared cache keeps them.
    res.setHeader("Cache-Control", "no-store");
    next();
  };
}
