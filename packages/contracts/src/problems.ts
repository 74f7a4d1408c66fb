/**
 * The one catalogue of problem types (RFC 9457) every service answers with. A problem's `type` is
 * `/problems/<code>`, and the same problem has the same code in every service (a missing bearer
 * token is `missing-token` in admin-api, event-ingest and map-storage alike).
 *
 * service-kit's `AppError` only takes a {@link ProblemCode}, so a service cannot emit a type that is
 * missing here; the OpenAPI documents reference these codes per route and status, and the root
 * README's "Problem types" table is checked against this list by a test.
 */

/** What one problem type means and the statuses it is sent with. */
export interface ProblemTypeInfo {
  /** HTTP statuses this type is answered with (most have exactly one). */
  readonly statuses: readonly number[];
  /** When it happens, for the README table and the OpenAPI documents. */
  readonly summary: string;
}

/** Every problem type, keyed by its code. */
export const PROBLEM_TYPES = {
  "invalid-request": {
    statuses: [400],
    summary: "The body breaks its schema; `errors[]` lists every invalid member as a JSON pointer into the body.",
  },
  "malformed-json": { statuses: [400], summary: "The body is not valid JSON (or a `.wam` file is not JSON)." },
  "invalid-parameter": { statuses: [400], summary: "A query parameter is invalid; `parameter` names it." },
  "invalid-path": { statuses: [400], summary: "A path segment holds a NUL or is not percent-encoded UTF-8 (`parameter` names it), or map-storage refused a file path (dot segments, encoded separators, ...) before touching storage." },
  "invalid-precondition": { statuses: [400], summary: "`If-Match` or `If-None-Match` is not `*` nor a list of quoted entity tags." },
  "invalid-zip": { statuses: [400], summary: "An upload's zip cannot be read (not a zip, corrupt, encrypted, an entry twice) or publishes nothing; `file` names the entry when there is one." },
  "malformed-patch": { statuses: [400], summary: "The JSON Patch is not JSON, not an array, or has a malformed operation (`errors[].pointer` is `/<index>`)." },
  "too-deeply-nested": {
    statuses: [400, 409, 422],
    summary: "JSON nests more than 64 levels of objects and arrays (`limit`): a body 400, a patch result 422, a stored file too deep to patch 409.",
  },
  "malformed-request": { statuses: [400], summary: "Node's HTTP parser refused the request (unknown method, raw non-ASCII byte in the path, control character in a header, broken request line)." },
  "bad-request": { statuses: [400], summary: "The HTTP request itself is malformed (a header or framing the server cannot read)." },
  "missing-token": { statuses: [401], summary: "No `Authorization` header; it must be `Bearer <token>` (`WWW-Authenticate` says which)." },
  "invalid-token": { statuses: [401], summary: "The `Authorization` header is malformed, or its token is unknown, revoked or not this service's." },
  "dashboard-session-required": { statuses: [401], summary: "No dashboard session cookie in this browser; open the dashboard link the platform gave you." },
  "dashboard-session-expired": { statuses: [401], summary: "The dashboard session has ended (expired, signed out or revoked); open a new link." },
  "dashboard-link-invalid": { statuses: [401], summary: "The dashboard link's code was never issued, or its sessions were revoked." },
  "wrong-world": { statuses: [403], summary: "The API key belongs to another world." },
  forbidden: { statuses: [403], summary: "A dashboard session asked for a route outside its own world, or one reserved to the operator (ADMIN_TOKEN)." },
  "missing-capability": { statuses: [403], summary: "The dashboard session lacks the capability the action needs; `capability` names it." },
  "cross-origin-request": { statuses: [403], summary: "A cookie-authenticated request that changes state came without the dashboard's own `Origin` (CSRF)." },
  "not-found": { statuses: [404], summary: "No route for this method and path, or no such resource." },
  "unknown-world": { statuses: [404], summary: "An event or hook names a world that does not exist; nothing was accepted." },
  "file-not-found": { statuses: [404], summary: "No file at this path in map-storage." },
  "unknown-schema-version": { statuses: [404], summary: "No WAM schema of that version; the known versions are listed." },
  "method-not-allowed": { statuses: [405], summary: "The path exists but not with this method; `Allow` lists the methods." },
  "organization-exists": { statuses: [409], summary: "An organization with this slug exists." },
  "world-exists": { statuses: [409], summary: "The organization has a world with this slug." },
  "custom-domain-taken": { statuses: [409], summary: "Another world uses this custom domain." },
  "endpoint-disabled": { statuses: [409], summary: "The endpoint is disabled, so nothing can be replayed or recovered to it; enable it first." },
  "endpoint-secret-required": { statuses: [409], summary: "The legacy endpoint has no secret; generate one (rotate-secret) first." },
  "quota-exceeded": {
    statuses: [409, 413],
    summary:
      "The world is at one of its quotas (`quota` names it, `limit` is its value); nothing was created or changed. 413 for its storage (`maxStorageBytes`), with the bytes it has in use (`bytesInUse`).",
  },
  "not-json": { statuses: [409], summary: "A JSON Patch was sent for a file that is not JSON." },
  "patch-test-failed": { statuses: [409], summary: "A `test` operation of the patch failed; nothing was changed." },
  "patch-conflict": { statuses: [409], summary: "An operation cannot apply to the current document (a missing path, ...); nothing was changed." },
  "dashboard-link-used": { statuses: [410], summary: "The dashboard link was already used; a link opens the dashboard once." },
  "dashboard-link-expired": { statuses: [410], summary: "The dashboard link was not opened within 10 minutes." },
  "request-timeout": { statuses: [408], summary: "The request did not arrive in time." },
  "precondition-failed": { statuses: [412], summary: "`If-Match` or `If-None-Match` does not hold for the current `ETag`." },
  "payload-too-large": { statuses: [413], summary: "The body (or the file a patch would produce, or a file or the whole of an upload once unpacked) exceeds the limit given in `limit`." },
  "unsupported-media-type": { statuses: [415], summary: "The body's `Content-Type` is not one this route takes (`Accept-Post`/`Accept-Patch` say which)." },
  "unsupported-encoding": { statuses: [415], summary: "The body's `Content-Encoding` or charset is not supported." },
  "expectation-failed": { statuses: [417], summary: "An `Expect` header other than `100-continue`." },
  "invalid-wam": {
    statuses: [400, 422],
    summary: "The `.wam` file (or the file a patch would produce) is not valid against its WAM schema; `errors[]` points at each field. 400 for a file of an upload, which `file` names.",
  },
  "too-many-failed-attempts": {
    statuses: [429],
    summary: "Too many failed authentications from this client; every credential is refused until `Retry-After` seconds have passed.",
  },
  "headers-too-large": { statuses: [431], summary: "The request's header section is larger than the server accepts." },
  internal: { statuses: [500], summary: "An unexpected error; quote the logged `errorId` when reporting it." },
  "dependency-unavailable": { statuses: [503], summary: "PostgreSQL, Redis or S3 did not answer; retry after `Retry-After` seconds." },
  "file-busy": { statuses: [503], summary: "The file's write lock could not be had within `WRITE_LOCK_WAIT_MS` (an upload: the world's, within `UPLOAD_LOCK_WAIT_MS`); retry." },
  "write-conflict": { statuses: [503], summary: "The file kept changing under this write; retry." },
} as const satisfies Record<string, ProblemTypeInfo>;

/** A problem type's code: the last segment of its `type`. */
export type ProblemCode = keyof typeof PROBLEM_TYPES;

/** Every code of the catalogue. */
export const PROBLEM_CODES = Object.keys(PROBLEM_TYPES) as ProblemCode[];

/** The `type` member of a problem document of `code`. */
export function problemTypeUri(code: ProblemCode): `/problems/${ProblemCode}` {
  return `/problems/${code}`;
}

/** True when `code` is in the catalogue. */
export function isProblemCode(code: string): code is ProblemCode {
  return Object.hasOwn(PROBLEM_TYPES, code);
}

/**
 * JSON Schema of a problem document as every service writes it (RFC 9457 members, plus this
 * project's extension members). Extension members stay open: RFC 9457 lets a type add its own.
 */
export const PROBLEM_SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "urn:vw:problem",
  title: "Problem (RFC 9457)",
  type: "object",
  required: ["type", "title", "status", "detail"],
  properties: {
    type: { type: "string", enum: PROBLEM_CODES.map(problemTypeUri), description: "`/problems/<code>`; see the catalogue of problem types." },
    title: { type: "string", description: "The HTTP status's reason phrase; the same for every occurrence of a status." },
    status: { type: "integer", minimum: 400, maximum: 599 },
    detail: { type: "string", description: "What was wrong, for a human." },
    instance: { type: "string", description: "The request's path." },
    errors: {
      type: "array",
      description: "Each invalid member: a JSON pointer (RFC 6901) into the request body (or `\"\"` for the path) and what is wrong there.",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["pointer", "detail"],
        properties: { pointer: { type: "string" }, detail: { type: "string" } },
      },
    },
    errorId: { type: "string", description: "Logged with the error (500, 503): quote it when reporting." },
    parameter: { type: "string", description: "The invalid query parameter (`invalid-parameter`)." },
    limit: { type: "integer", description: "The limit: a size in bytes (`payload-too-large`, `quota-exceeded` of `maxStorageBytes`), a count (`quota-exceeded`)." },
    quota: { type: "string", description: "The quota reached (`quota-exceeded`): `maxEndpoints`, `maxAuthEndpoints`, `maxStorageBytes`." },
    bytesInUse: { type: "integer", description: "The bytes the world's files take (`quota-exceeded` of `maxStorageBytes`)." },
    worlds: { type: "array", items: { type: "string" }, description: "The worlds named that do not exist (`unknown-world`)." },
    capability: { type: "string", description: "The capability the session lacks (`missing-capability`)." },
    file: { type: "string", description: "The zip entry an upload was refused for, as named in the zip (`invalid-wam`, `invalid-zip`, `invalid-path`, `payload-too-large`)." },
  },
} as const;
