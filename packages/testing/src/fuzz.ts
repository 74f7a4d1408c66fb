/**
 * Property-based hostile-input testing of an HTTP service (fast-check): generated malformed
 * bodies, headers and paths sent to every registered route. The count is bounded and the seed
 * printed; `FUZZ_SEED=<n>` replays a run and `FUZZ_RUNS=<n>` changes its size (read here, by the
 * tests only).
 */
import { request } from "node:http";
import { connect } from "node:net";
import fc from "fast-check";
import type { RegisteredRoute } from "./registered-routes.js";

/** The seed of this test run: `FUZZ_SEED` when set, else a fresh one, printed so a failure can be replayed. */
export function fuzzSeed(label: string): number {
  const fromEnv = process.env.FUZZ_SEED;
  const seed = fromEnv !== undefined && /^-?\d+$/.test(fromEnv) ? Number(fromEnv) : Math.floor(Math.random() * 2 ** 31);
  process.stdout.write(`[fuzz] ${label}: seed ${seed} (replay with FUZZ_SEED=${seed})\n`);
  return seed;
}

/** Number of generated cases of a property: `FUZZ_RUNS` when set, else `fallback`. */
export function fuzzRuns(fallback: number): number {
  const n = Number(process.env.FUZZ_RUNS);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/** One generated request. */
export interface FuzzRequest {
  method: string;
  /** Already percent-encoded request target. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Why this request must be refused (4xx); undefined when any non-5xx answer is fine. */
  malformation?: string;
}

/** An answer as read off the wire. */
export interface FuzzAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** How to reach a service and what its routes look like. */
export interface FuzzTarget {
  baseUrl: string;
  routes: RegisteredRoute[];
  /** Values that exist for path parameters, by parameter name (`org` → its slug): requests then reach the routes' own checks. */
  knownParams?: Record<string, string[]>;
  /** Headers of an authorised caller (`Authorization`), sent on most generated requests. */
  authHeaders?: Record<string, string>;
  /** Media type of a route's request body; `application/json` by default. */
  bodyType?: (route: RegisteredRoute) => string;
}

const BODY_METHODS = new Set(["POST", "PUT", "PATCH"]);

/** Sends a request exactly as given (no normalisation of the path, body bytes as they are). */
export function sendRequest(baseUrl: string, req: FuzzRequest): Promise<FuzzAnswer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const r = request(
      { host: url.hostname, port: url.port, method: req.method, path: req.path, headers: { ...req.headers, ...(req.body ? { "content-length": String(req.body.length) } : {}) }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    r.on("error", reject);
    r.end(req.body);
  });
}

/**
 * What every answer must be: below 500, and for an error a problem document (RFC 9457) whose
 * `status` is the answer's; a refused request must be refused (4xx). Returns a description of
 * what is wrong, or undefined.
 */
export function answerProblem(req: FuzzRequest, res: FuzzAnswer): string | undefined {
  if (res.status >= 500) return `answered ${res.status}`;
  if (req.malformation !== undefined && (res.status < 400 || res.status >= 500)) return `accepted a malformed request (${req.malformation}) with ${res.status}`;
  if (res.status >= 400 && req.method !== "HEAD") {
    const type = String(res.headers["content-type"] ?? "");
    if (!type.startsWith("application/problem+json")) return `error ${res.status} with content type '${type}', not application/problem+json`;
    let doc: { type?: unknown; status?: unknown };
    try {
      doc = JSON.parse(res.body.toString("utf8")) as typeof doc;
    } catch {
      return `error ${res.status} whose body is not JSON`;
    }
    if (typeof doc.type !== "string" || doc.status !== res.status) return `error ${res.status} with a problem document lacking type/status: ${res.body.toString("utf8").slice(0, 200)}`;
  }
  const requestId = res.headers["x-request-id"];
  if (typeof requestId !== "string" || !/^[\x21-\x7e]{1,128}$/.test(requestId)) return `no sane X-Request-Id in the answer (${String(requestId)})`;
  return undefined;
}

// ---- generators ------------------------------------------------------------------------------

/** Text that is not platform text: a NUL or a lone surrogate somewhere in a string. */
export const unsafeText: fc.Arbitrary<string> = fc
  .tuple(fc.string({ maxLength: 8 }), fc.constantFrom("\u0000", "\ud800", "\udfff", "\udbff", "a\u0000"), fc.string({ maxLength: 8 }))
  .map(([a, bad, b]) => `${a}${bad}${b}`);

/** A JSON value holding unsafe text (as a value or a member name) at a random place. */
const jsonWithUnsafeText = fc
  .tuple(unsafeText, fc.boolean(), fc.array(fc.oneof(fc.constant("array"), fc.string({ maxLength: 6 })), { maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }))
  .map(([bad, asKey, path, sibling]) => {
    let v: unknown = asKey ? { [bad]: sibling } : bad;
    for (const step of path) v = step === "array" ? [sibling, v] : { [step]: v, x: sibling };
    return typeof v === "object" && v !== null ? v : { value: v };
  });

/** Objects and arrays nested past the platform's limit (64). */
const tooDeep = fc.tuple(fc.integer({ min: 65, max: 5000 }), fc.boolean()).map(([depth, objects]) =>
  objects ? `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}` : `${"[".repeat(depth)}${"]".repeat(depth)}`,
);

/** A malformed body: [bytes, content type, why it must be refused]. */
function malformedBody(jsonType: string): fc.Arbitrary<[Buffer, string, string]> {
  const json = (s: string): Buffer => Buffer.from(s, "utf8");
  return fc.oneof(
    // (Not the empty string: an empty body is no body, which routes without one accept.)
    fc.string({ minLength: 1, maxLength: 40 }).filter((s) => !isJson(s)).map((s): [Buffer, string, string] => [json(s), jsonType, "not JSON"]),
    jsonWithUnsafeText.map((v): [Buffer, string, string] => [json(JSON.stringify(v)), jsonType, "NUL or lone surrogate"]),
    tooDeep.map((s): [Buffer, string, string] => [json(s), jsonType, "nested too deep"]),
    fc
      .tuple(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom("utf-16le", "utf-16be", "UTF-16", "latin1", "iso-8859-1", "utf-32", "x-bogus"))
      .map(([v, charset]): [Buffer, string, string] => [
        Buffer.from(JSON.stringify({ value: v }), charset.startsWith("utf-16") || charset === "UTF-16" ? "utf16le" : "latin1"),
        `${jsonType}; charset=${charset}`,
        `charset ${charset}`,
      ]),
    fc
      .tuple(fc.string({ maxLength: 10 }), fc.uint8Array({ minLength: 1, maxLength: 4 }).map((b) => Buffer.from(b.map((x) => 0x80 | x))))
      .filter(([, bytes]) => !isUtf8(bytes))
      .map(([s, bytes]): [Buffer, string, string] => [Buffer.concat([json(`{"name":"${s.replace(/["\\]/g, "")}`), bytes, json('"}')]), jsonType, "not UTF-8"]),
    fc.constantFrom("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "application/jsonx").map(
      (type): [Buffer, string, string] => [json('{"name":"x"}'), type, `content type ${type}`],
    ),
  );
}

function isJson(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

function isUtf8(b: Buffer): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b);
    return true;
  } catch {
    return false;
  }
}

/**
 * Path parameter values that are not platform text, or garbage, percent-encoded as a client would.
 * Long values stay at 200 bytes: s3rver (the test S3) stores a key segment as a file name plus a
 * suffix, so a longer one fails there (503) where real S3 accepts 1024-byte keys.
 */
const hostileParam = fc.oneof(
  unsafeText.map((s) => ({ text: encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "")).concat("%00"), unsafe: true })),
  fc.constantFrom("%00", "a%00b", "%", "%zz", "%ff", "%c0%80", "%ed%a0%80", "..", "%2e%2e", "%2F", "a".repeat(200), "-", "_").map((text) => ({ text, unsafe: text.includes("%00") })),
  fc.string({ maxLength: 30 }).map((s) => ({ text: encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "")) || "x", unsafe: false })),
);

/** Header noise every request may carry: request ids, preconditions, accept, garbage auth. */
const headerNoise = fc.record(
  {
    "x-request-id": fc.oneof(fc.uuid(), fc.string({ unit: fc.constantFrom(..."abc;:=+/ \"'<>{}\t"), maxLength: 300 })),
    "if-match": fc.oneof(fc.constant("*"), fc.string({ unit: fc.constantFrom(..."W/\"abc, "), maxLength: 40 })),
    // (No `*`: express answers any GET 304 to `If-None-Match: *`, a documented-elsewhere edge, not hostile input.)
    "if-none-match": fc.string({ unit: fc.constantFrom(..."W/\"abc, "), maxLength: 40 }),
    accept: fc.constantFrom("*/*", "application/json", "text/html", "application/problem+json", ";;;"),
    authorization: fc.constantFrom("Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "Bearer \u00ff", "bearer x y z"),
  },
  { requiredKeys: [] },
);

/** Builds a request target from an express path pattern and one value per parameter. */
function fillPath(pattern: string, values: (name: string) => string): string {
  return pattern.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => values(name));
}

/** Parameter names of an OpenAPI path template (`/worlds/{org}/{world}`), as `registeredRoutes` gives them. */
function paramNames(pattern: string): string[] {
  return [...pattern.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!);
}

/** Routes with a path template (a route registered with a regular expression cannot be filled in; tests list its address space as a template). */
const templateRoutes = (target: FuzzTarget): RegisteredRoute[] => target.routes.filter((r) => r.pattern === undefined);

/** The HTTP method to send for a route (`all`-only routes get a POST). */
const methodOf = (route: RegisteredRoute): string => (route.method.toLowerCase() === "all" ? "POST" : route.method.toUpperCase());

/**
 * Requests that must be refused: each carries at least one malformation the platform refuses
 * whatever the route (a NUL in a path parameter or the query, or a malformed body on a route
 * that reads one), plus random header noise, on any registered route.
 */
export function malformedRequests(target: FuzzTarget): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...templateRoutes(target)).chain((route) => {
    const method = methodOf(route);
    const names = paramNames(route.path);
    const jsonType = target.bodyType?.(route) ?? "application/json";
    const kinds: Array<fc.Arbitrary<FuzzRequest>> = [];
    const base = fc.record({
      known: fc.array(fc.nat(), { minLength: names.length, maxLength: names.length }),
      noise: headerNoise,
      auth: fc.boolean(),
    });
    const knownValue = (name: string, i: number): string => {
      const values = target.knownParams?.[name];
      return values && values.length > 0 ? encodeURIComponent(values[i % values.length]!) : "x";
    };
    const headersOf = (noise: Record<string, string>, auth: boolean) => ({ ...noise, ...(auth ? target.authHeaders : {}) });
    // A NUL in one path parameter.
    if (names.length > 0) {
      kinds.push(
        fc.tuple(base, fc.nat({ max: names.length - 1 }), hostileParam).map(([b, which, bad]) => ({
          method,
          path: fillPath(route.path, (name) => (name === names[which] ? `${bad.text}%00` : knownValue(name, b.known[names.indexOf(name)] ?? 0))),
          headers: headersOf(b.noise, b.auth),
          malformation: `NUL in path parameter ${names[which]}`,
        })),
      );
    }
    // A NUL in the query string (name or value).
    kinds.push(
      fc.tuple(base, fc.string({ maxLength: 10 }), fc.boolean()).map(([b, s, inName]) => {
        const bad = `${encodeURIComponent(s.replace(/[\ud800-\udfff]/g, ""))}%00`;
        return {
          method,
          path: `${fillPath(route.path, (name) => knownValue(name, b.known[names.indexOf(name)] ?? 0))}?${inName ? `${bad}=1` : `limit=${bad}`}`,
          headers: headersOf(b.noise, b.auth),
          malformation: "NUL in the query",
        };
      }),
    );
    // A malformed body, with everything else right.
    if (BODY_METHODS.has(method)) {
      kinds.push(
        fc.tuple(base, malformedBody(jsonType)).map(([b, [body, type, why]]) => ({
          method,
          path: fillPath(route.path, (name) => knownValue(name, b.known[names.indexOf(name)] ?? 0)),
          headers: { ...headersOf(b.noise, true), "content-type": type },
          body,
          malformation: `body: ${why}`,
        })),
      );
    }
    return fc.oneof(...kinds);
  });
}

/**
 * Arbitrary requests (any JSON body, hostile or existing parameter values, header noise) that may
 * be accepted or refused: the property is only that nothing answers 5xx or a bare error.
 * `DELETE` never receives existing parameter values, so a run does not delete what the next
 * cases need.
 */
export function arbitraryRequests(target: FuzzTarget): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...templateRoutes(target)).chain((route) => {
    const method = methodOf(route);
    const names = paramNames(route.path);
    const param = (name: string) => {
      const known = target.knownParams?.[name] ?? [];
      const usable = method === "DELETE" || known.length === 0 ? [] : [fc.constantFrom(...known).map(encodeURIComponent)];
      return fc.oneof(...usable, ...usable, hostileParam.map((p) => p.text));
    };
    return fc
      .record({
        values: fc.tuple(...names.map(param), fc.constant("")),
        noise: headerNoise,
        auth: fc.boolean(),
        body: BODY_METHODS.has(method) ? fc.option(fc.jsonValue({ maxDepth: 4 }), { nil: undefined }) : fc.constant(undefined),
      })
      .map(({ values, noise, auth, body }) => ({
        method,
        path: fillPath(route.path, (name) => values[names.indexOf(name)] ?? "x"),
        headers: {
          ...noise,
          ...(auth ? target.authHeaders : {}),
          ...(body === undefined ? {} : { "content-type": target.bodyType?.(route) ?? "application/json" }),
        },
        ...(body === undefined ? {} : { body: Buffer.from(JSON.stringify(body), "utf8") }),
      }));
  });
}

/**
 * Runs `arbitrary` against the target: every answer must pass {@link answerProblem}. Resolves
 * when all cases passed; throws fast-check's report (with the seed and the shrunk case) otherwise.
 */
export async function fuzzTarget(baseUrl: string, arbitrary: fc.Arbitrary<FuzzRequest>, options: { seed: number; numRuns: number }): Promise<void> {
  await fc.assert(
    fc.asyncProperty(arbitrary, async (req) => {
      const res = await sendRequest(baseUrl, req);
      const problem = answerProblem(req, res);
      if (problem) throw new Error(`${req.method} ${req.path.slice(0, 200)}: ${problem}`);
    }),
    { seed: options.seed, numRuns: options.numRuns, endOnFailure: true },
  );
}

/** A raw HTTP/1.1 request head Node's parser refuses, and the status it must be answered with. */
export interface RawCase {
  head: Buffer;
  status: number;
  why: string;
}

/**
 * Requests refused by Node's HTTP layer before any route runs: a method that is not a token, a
 * raw non-ASCII byte in the path, a header section over the size limit, an `Expect` other than
 * `100-continue`, a control character in a header value, a broken request line.
 */
export function nodeLevelMalformations(path = "/healthz"): fc.Arbitrary<RawCase> {
  const head = (s: string | Buffer) => (typeof s === "string" ? Buffer.from(s, "latin1") : s);
  return fc.oneof(
    fc.string({ unit: fc.constantFrom(..."ABC<>@()[]{}\"?=,;\\ "), minLength: 1, maxLength: 10 }).filter((m) => !/^[A-Z]+$/.test(m)).map((m) => ({
      head: head(`${m} ${path} HTTP/1.1\r\nHost: x\r\n\r\n`),
      status: 400,
      why: `method '${m}'`,
    })),
    fc.tuple(fc.constantFrom("GET", "HEAD"), fc.uint8Array({ minLength: 1, maxLength: 6 })).map(([method, bytes]) => ({
      head: Buffer.concat([head(`${method} ${path}/`), Buffer.from(bytes.map((b) => 0x80 | b)), head(" HTTP/1.1\r\nHost: x\r\n\r\n")]),
      status: 400,
      why: `${method} with a raw non-ASCII byte in the path`,
    })),
    fc.integer({ min: 17_000, max: 60_000 }).map((n) => ({
      head: head(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(n)}\r\n\r\n`),
      status: 431,
      why: `${n}-byte header`,
    })),
    fc.string({ unit: fc.constantFrom(..."abcdef-0123456789="), minLength: 1, maxLength: 20 }).filter((e) => e.toLowerCase() !== "100-continue").map((e) => ({
      head: head(`POST ${path} HTTP/1.1\r\nHost: x\r\nExpect: ${e}\r\nContent-Length: 2\r\n\r\n{}`),
      status: 417,
      why: `Expect: ${e}`,
    })),
    fc.constantFrom("\u0000", "\u0001", "\u001f", "\u007f").map((c) => ({
      head: head(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Bad: a${c}b\r\n\r\n`),
      status: 400,
      why: `control character U+${c.charCodeAt(0).toString(16).padStart(4, "0")} in a header value`,
    })),
    // (Not `GET /path` alone: that is a valid HTTP/0.9-style line Node answers normally.)
    fc.constantFrom(`GET ${path} HTTP/9.9`, `GET ${path} HTTP/1.1 extra`, "GET", `GET ${path} HTTP/1.1x`, `GET ${path} FTP/1.1`).map((line) => ({
      head: head(`${line}\r\nHost: x\r\n\r\n`),
      status: 400,
      why: `request line '${line}'`,
    })),
  );
}

/** Sends raw bytes on a fresh connection and reads the answer until the server closes it. */
export function sendRaw(baseUrl: string, bytes: Buffer): Promise<{ status: number; contentType: string; body: string }> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNRESET" && chunks.length > 0 ? undefined : reject(err)));
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("latin1");
      const [head = "", body = ""] = text.split("\r\n\r\n", 2);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      const contentType = /\r\ncontent-type: *([^\r]*)/i.exec(head)?.[1] ?? "";
      resolve({ status, contentType, body });
    });
    socket.write(bytes);
  });
}

/**
 * Sends generated {@link nodeLevelMalformations} aimed at `path`: each must be answered with its
 * status and an `application/problem+json` body whose `status` matches. Throws fast-check's report
 * (seed, shrunk case) otherwise.
 */
export async function fuzzNodeLevel(baseUrl: string, path: string, options: { seed: number; numRuns: number }): Promise<void> {
  await fc.assert(
    fc.asyncProperty(nodeLevelMalformations(path), async (c) => {
      const res = await sendRaw(baseUrl, c.head);
      let status: unknown;
      if (c.head.subarray(0, 5).toString("latin1") === "HEAD ") {
        // An answer to HEAD carries no body: the status line and the problem's type are what it has.
        status = res.body === "" ? res.status : `a body of ${res.body.length} bytes`;
      } else {
        try {
          status = (JSON.parse(res.body) as { status?: unknown }).status;
        } catch {
          status = undefined;
        }
      }
      if (res.status !== c.status || res.contentType !== "application/problem+json" || status !== c.status) {
        throw new Error(`${c.why}: answered ${res.status} '${res.contentType}' ${res.body.slice(0, 200)}, expected a ${c.status} problem document`);
      }
    }),
    { seed: options.seed, numRuns: options.numRuns, endOnFailure: true },
  );
}

/** fast-check itself, for the tests' own properties (one version, pinned by this package). */
export { fc };
