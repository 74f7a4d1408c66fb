/**
 * The routes an express 5 app registers, read from its router stack: what the fuzz tests call and
 * what the OpenAPI documents must describe.
 */

/** One registered route: a method and its path in OpenAPI form (`/worlds/{org}/{world}`). */
export interface RegisteredRoute {
  /** Lower-case HTTP method (`get`, `post`...); `all` for a route registered with `.all()` only. */
  method: string;
  /** The path with express parameters written as OpenAPI templates (`:org` and `*path` become `{org}`, `{path}`). */
  path: string;
  /** Set when the route's path is a regular expression; `path` is then its source. */
  pattern?: RegExp;
}

interface RouteLike {
  path: unknown;
  methods: Record<string, boolean>;
}

interface LayerLike {
  route?: RouteLike;
  rawPath?: unknown;
  handle?: { stack?: unknown };
}

/** Express path syntax to an OpenAPI path template. */
export function toOpenApiPath(expressPath: string): string {
  return expressPath.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, "{$1}");
}

/**
 * Every route of `app` (an express 5 application or router), mounted routers included, with the
 * methods each registers. Methods only reached through `.all()` (this project's 405 answers) are
 * not listed, unless `.all()` is all the route has. Middleware without a route is not a route.
 */
export function registeredRoutes(app: unknown): RegisteredRoute[] {
  const root = (app as { router?: { stack?: unknown }; stack?: unknown }).router?.stack ?? (app as { stack?: unknown }).stack;
  if (!Array.isArray(root)) throw new Error("registeredRoutes: not an express 5 application or router (no router stack)");
  const out: RegisteredRoute[] = [];
  walk(root as LayerLike[], "", out);
  return out;
}

function walk(stack: LayerLike[], prefix: string, out: RegisteredRoute[]): void {
  for (const layer of stack) {
    if (layer.route) {
      const methods = Object.keys(layer.route.methods).filter((m) => m !== "_all" && layer.route?.methods[m]);
      const listed = methods.length > 0 ? methods : ["all"];
      for (const path of asList(layer.route.path)) {
        for (const method of listed) {
          if (path instanceof RegExp) out.push({ method, path: `${prefix}${path.source}`, pattern: prefix === "" ? path : new RegExp(`^${escape(prefix)}${path.source.replace(/^\^/, "")}`) });
          // A router's "/" route mounted at a prefix answers the prefix itself (`/dashboard/api/session`).
          else out.push({ method, path: toOpenApiPath(prefix !== "" && path === "/" ? prefix : `${prefix}${String(path)}`) });
        }
      }
      continue;
    }
    const inner = layer.handle?.stack;
    if (Array.isArray(inner)) {
      const mount = typeof layer.rawPath === "string" && layer.rawPath !== "/" ? layer.rawPath : "";
      walk(inner as LayerLike[], `${prefix}${mount}`, out);
    }
  }
}

function asList(path: unknown): unknown[] {
  return Array.isArray(path) ? path.flat(Infinity) : [path];
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** What {@link compareRoutes} found between an app's routes and an OpenAPI document's operations. */
export interface RouteComparison {
  /** `METHOD /path` registered by the app but missing from the document. */
  undocumented: string[];
  /** `METHOD /path` described by the document but not registered by the app. */
  unregistered: string[];
}

const OPERATION_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/**
 * Compares `routes` with the operations of `document`. Parameter names do not matter
 * (`/a/{id}` and `/a/{endpointId}` are one route); a route registered with a regular expression
 * matches a documented path when the path, its parameters filled in, matches the expression. A
 * documented `head` is satisfied by a registered `get` (express answers HEAD through GET).
 * `middlewarePaths` are documented paths served by middleware rather than routes (static files):
 * they are not expected among `routes` (the conformance recorder still checks their answers).
 */
export function compareRoutes(
  routes: RegisteredRoute[],
  document: { paths?: Record<string, Record<string, unknown>> },
  options: { middlewarePaths?: readonly string[] } = {},
): RouteComparison {
  const normalise = (path: string) => path.replace(/\{[^}]+\}/g, "{}");
  const documented: { method: string; path: string }[] = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of Object.keys(item)) if (OPERATION_METHODS.includes(method)) documented.push({ method, path });
  }
  const covers = (route: RegisteredRoute, doc: { method: string; path: string }) => {
    const methodOk = route.method === doc.method || route.method === "all" || (doc.method === "head" && route.method === "get");
    if (!methodOk) return false;
    if (route.pattern) return route.pattern.test(doc.path.replace(/\{[^}]+\}/g, "x"));
    return normalise(route.path) === normalise(doc.path);
  };
  return {
    undocumented: routes.filter((r) => !documented.some((d) => covers(r, d))).map((r) => `${r.method.toUpperCase()} ${r.path}`),
    unregistered: documented
      .filter((d) => !(options.middlewarePaths ?? []).includes(d.path) && !routes.some((r) => covers(r, d)))
      .map((d) => `${d.method.toUpperCase()} ${d.path}`),
  };
}
