/**
 * Route enumeration of an express 5 app, for tests that must cover every registered route (the
 * hostile-input fuzz tests, the OpenAPI "every route is described" check): one walker instead of
 * each test keeping its own list that drifts from the app.
 */

/** One registered route: an HTTP method and the express path pattern (`/admin/v1/worlds/:org/:world`). */
export interface RegisteredRoute {
  method: string;
  path: string;
}

// The parts of express 5's router (router 2.x) the walker reads.
interface RouterLayer {
  rawPath?: unknown;
  route?: { path: unknown; methods: Record<string, boolean | undefined> };
  handle?: { stack?: RouterLayer[] };
}

/**
 * Every route registered on `app` and on the routers mounted in it (recursively), as
 * method + full path, in registration order, without duplicates. `app.all()` routes are listed
 * with method `ALL`. Middleware that is not a route (a catch-all handler such as map-storage's
 * file handler) is not listed: tests add such address spaces themselves.
 */
export function registeredRoutes(app: unknown): RegisteredRoute[] {
  const router = (app as { router?: { stack?: RouterLayer[] } }).router;
  if (!router?.stack) throw new Error("registeredRoutes: not an express 5 app (no app.router.stack)");
  const out: RegisteredRoute[] = [];
  const seen = new Set<string>();
  const walk = (stack: RouterLayer[], prefix: string): void => {
    for (const layer of stack) {
      if (layer.route) {
        for (const path of asPaths(layer.route.path)) {
          for (const [method, on] of Object.entries(layer.route.methods)) {
            if (!on) continue;
            const route = { method: method === "_all" ? "ALL" : method.toUpperCase(), path: join(prefix, path) };
            const key = `${route.method} ${route.path}`;
            if (!seen.has(key)) {
              seen.add(key);
              out.push(route);
            }
          }
        }
      } else if (layer.handle?.stack) {
        const mounts = asPaths(layer.rawPath);
        for (const mount of mounts.length > 0 ? mounts : ["/"]) walk(layer.handle.stack, join(prefix, mount));
      }
    }
  };
  walk(router.stack, "");
  return out;
}

function asPaths(p: unknown): string[] {
  if (typeof p === "string") return [p];
  if (Array.isArray(p)) return p.flat(Infinity).filter((x): x is string => typeof x === "string");
  return [];
}

function join(prefix: string, path: string): string {
  if (path === "/" || path === "") return prefix === "" ? "/" : prefix;
  return `${prefix.replace(/\/$/, "")}${path.startsWith("/") ? "" : "/"}${path}`;
}
