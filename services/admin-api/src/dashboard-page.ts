import { extname, join } from "node:path";
import express, { Router, type RequestHandler } from "express";
import { notFound } from "@vw/service-kit";

/** Vite writes content-hashed files under `assets/`: their bytes never change under one name. */
const HASHED_ASSETS_PREFIX = "/assets/";
const IMMUTABLE = "public, max-age=31536000, immutable";
/** Revalidated on every load, so a deploy's new index.html (naming new hashed assets) is seen at once. */
const REVALIDATE = "no-cache";

/**
 * The dashboard's Content-Security-Policy: scripts, styles, images, fonts and API calls from this
 * origin only (no inline script, no CDN, no outside host), nothing else at all; framing only by
 * `frameAncestors` (`'none'` when empty).
 */
export function dashboardCsp(frameAncestors: readonly string[]): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    `frame-ancestors ${frameAncestors.length === 0 ? "'none'" : frameAncestors.join(" ")}`,
  ].join("; ");
}

/**
 * Security headers of everything under `/dashboard/`. `X-Frame-Options: DENY` backs
 * `frame-ancestors 'none'` for browsers that predate CSP 2; it cannot list origins, so with
 * DASHBOARD_FRAME_ANCESTORS set it is left out and `frame-ancestors` alone decides (every current
 * browser gives it precedence).
 */
export function dashboardSecurityHeaders(frameAncestors: readonly string[]): RequestHandler {
  const csp = dashboardCsp(frameAncestors);
  return (_req, res, next) => {
    res.setHeader("Content-Security-Policy", csp);
    if (frameAncestors.length === 0) res.setHeader("X-Frame-Options", "DENY");
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Referrer-Policy", "no-referrer");
    next();
  };
}

const notBuilt = () => notFound("The dashboard is not built into this admin-api: run `pnpm build` (it writes packages/dashboard/dist/).");

/**
 * The built dashboard (`@vw/dashboard`'s dist folder) under `/dashboard/`: its files as they are,
 * hashed assets cached for a year, and `index.html` for `/dashboard/` and for every sub-path
 * without a file extension (the page's own routes), revalidated each time. A missing file with
 * an extension is a 404 problem, not the page. `/dashboard` redirects to `/dashboard/` (the page's
 * relative URLs need the slash; the `#code=` fragment is kept by the browser across it).
 */
export function dashboardPageRouter(assetsDir: string | undefined): Router {
  const router = Router({ caseSensitive: true, strict: true });
  router.use((req, res, next) => {
    if (req.originalUrl === "/dashboard" || req.originalUrl.startsWith("/dashboard?")) {
      res.redirect(301, `/dashboard/${req.originalUrl.slice("/dashboard".length)}`);
      return;
    }
    next();
  });
  if (assetsDir === undefined) {
    router.use((req, _res, next) => next(req.method === "GET" || req.method === "HEAD" ? notBuilt() : undefined));
    return router;
  }
  const indexFile = join(assetsDir, "index.html");
  router.use(
    express.static(assetsDir, {
      index: false,
      redirect: false,
      dotfiles: "ignore",
      setHeaders: (res, path) => {
        res.setHeader("Cache-Control", path.startsWith(join(assetsDir, HASHED_ASSETS_PREFIX)) ? IMMUTABLE : REVALIDATE);
      },
    }),
  );
  router.use((req, res, next) => {
    if ((req.method !== "GET" && req.method !== "HEAD") || extname(req.path) !== "") {
      next();
      return;
    }
    res.setHeader("Cache-Control", REVALIDATE);
    res.sendFile(indexFile, { dotfiles: "ignore", lastModified: true }, (err) => {
      if (!err) return;
      next((err as NodeJS.ErrnoException).code === "ENOENT" ? notBuilt() : err);
    });
  });
  return router;
}
