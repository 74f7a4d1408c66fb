import { Router, type Request, type Response } from "express";
import { AppError, clientAddress, type AuthThrottle } from "@vw/service-kit";
import { validateCreateDashboardSessionRequest, validateExchangeDashboardCodeRequest } from "@vw/contracts";
import { readCookie, requireDashboardOrigin, sessionCookieHeader, type SessionCookiePolicy } from "./dashboard-auth.js";
import { toDashboardSessionResource, type DashboardSessionsService } from "./dashboard-sessions.service.js";
import { jsonBody, methodNotAllowed, validBody } from "./http-support.js";

/**
 * `/worlds/{org}/{world}/dashboard-sessions` under `/admin/v1`: the platform mints one-time links
 * (POST) and revokes every session of the world (DELETE). Operator only: `authorizeSession`
 * refuses this path to dashboard sessions whatever their capabilities.
 */
export function dashboardSessionsAdminRouter(sessions: DashboardSessionsService): Router {
  const router = Router({ caseSensitive: true });
  router
    .route("/worlds/:org/:world/dashboard-sessions")
    .post(async (req, res) => {
      const request = validBody(validateCreateDashboardSessionRequest, req.body ?? {});
      const link = await sessions.mint(req.params.org, req.params.world, request);
      // The link opens a session: no cache may keep it.
      res.status(201).set("Cache-Control", "no-store").json(link);
    })
    .delete(async (req, res) => {
      await sessions.revokeAll(req.params.org, req.params.world);
      res.status(204).end();
    })
    .all(methodNotAllowed(["POST", "DELETE"]));
  return router;
}

const isUnknownCode = (err: unknown): boolean => err instanceof AppError && err.code === "dashboard-link-invalid";

/** Dependencies of {@link dashboardSessionApiRouter}. */
export interface DashboardSessionApiOptions {
  sessions: DashboardSessionsService;
  cookie: SessionCookiePolicy;
  dashboardOrigin: string;
  now: () => Date;
  /** Throttles unknown codes per client (guessing a link's code). */
  throttle?: AuthThrottle;
}

/**
 * `/dashboard/api/session`, the page's own session API: `POST {code}` exchanges a link's one-time
 * code for the session cookie, `GET` describes the current session, `DELETE` signs out. The POST
 * is CSRF-checked too: a page elsewhere must not be able to sign a visitor into a world of its
 * choosing (login CSRF).
 */
export function dashboardSessionApiRouter(options: DashboardSessionApiOptions): Router {
  const router = Router({ caseSensitive: true });
  const { sessions, cookie } = options;
  router.use((_req, res, next) => {
    res.set("Cache-Control", "no-store");
    next();
  });
  router
    .route("/")
    .post(...jsonBody("4kb"), async (req: Request, res: Response) => {
      requireDashboardOrigin(req, options.dashboardOrigin);
      const { code } = validBody(validateExchangeDashboardCodeRequest, req.body);
      // Only unknown codes count: a used or expired link is a real one, opened late or twice.
      const exchange = () => sessions.exchange(code);
      const { token, session } = await (options.throttle ? options.throttle.guard(clientAddress(req), exchange, isUnknownCode) : exchange());
      res.setHeader("Set-Cookie", sessionCookieHeader(cookie, token, session.expiresAt, options.now()));
      res.json(toDashboardSessionResource(session));
    })
    .get(async (req, res) => {
      const token = readCookie(req, cookie.name);
      const session = token === undefined ? null : await sessions.authenticate(token);
      if (!session) {
        if (token !== undefined) res.setHeader("Set-Cookie", sessionCookieHeader(cookie, null));
        throw new AppError(
          401,
          token === undefined ? "dashboard-session-required" : "dashboard-session-expired",
          token === undefined
            ? "There is no dashboard session in this browser. Open the dashboard link your platform gave you."
            : "This dashboard session has ended (expired, signed out or revoked). Open a new dashboard link.",
        );
      }
      res.json(toDashboardSessionResource(session));
    })
    .delete(async (req, res) => {
      requireDashboardOrigin(req, options.dashboardOrigin);
      const token = readCookie(req, cookie.name);
      if (token !== undefined) await sessions.signOut(token);
      res.setHeader("Set-Cookie", sessionCookieHeader(cookie, null));
      res.status(204).end();
    })
    .all(methodNotAllowed(["GET", "POST", "DELETE"]));
  return router;
}
