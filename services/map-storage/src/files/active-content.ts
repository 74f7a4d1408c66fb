/**
 * Files a browser could run as a page (HTML, SVG, XML and its dialects, PDF). Every world's files
 * share map-storage's origin, so a script in one world's `.html` or `.svg` would otherwise run as
 * that origin: read what the origin's pages can, phish under its name. They are served with a CSP
 * `sandbox`, which gives the document an opaque origin of its own whoever opens it (navigation,
 * iframe, new tab), and `X-Content-Type-Options: nosniff` (sent with every file) so no other type
 * is ever sniffed into one of these.
 *
 * `Access-Control-Allow-Origin: *` stays on them, as on every file: GET is public and never
 * credentialed, so CORS only lets other origins read bytes anyone can download; it is running as
 * this origin, not being read, that the sandbox takes away.
 */

/**
 * ACTIVE_FILE_SANDBOX:
 * - `strict` (default): no script, form, popup or plugin; the page may only load images, styles,
 *   fonts and media of map-storage itself;
 * - `allow-scripts`: scripts, forms, popups and modals run, still in an opaque origin of their own
 *   (no access to map-storage's storage or cookies, requests sent as `Origin: null`). For a
 *   deployment that serves map files from a domain of their own (see the README), where maps embed
 *   interactive pages of their world (WorkAdventure's websites with the scripting API).
 */
export const ACTIVE_FILE_SANDBOXES = ["strict", "allow-scripts"] as const;
export type ActiveFileSandbox = (typeof ACTIVE_FILE_SANDBOXES)[number];
export const DEFAULT_ACTIVE_FILE_SANDBOX: ActiveFileSandbox = "strict";

/** The CSP of an active file under each setting. */
export const ACTIVE_FILE_CSP: Readonly<Record<ActiveFileSandbox, string>> = Object.freeze({
  strict: "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self'; media-src 'self'",
  "allow-scripts": "sandbox allow-scripts allow-forms allow-popups allow-modals",
});

/** Media types (without parameters) a browser renders as a document that can run script. */
const ACTIVE_TYPES = new Set(["text/html", "application/xhtml+xml", "image/svg+xml", "text/xml", "application/xml", "text/xsl", "application/pdf"]);

/** True when a file of `contentType` could run script if opened as a page. */
export function isActiveContentType(contentType: string): boolean {
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  // Any `+xml` dialect (XHTML, SVG, MathML, Atom…) can carry XHTML with a script element.
  return ACTIVE_TYPES.has(type) || type.endsWith("+xml");
}

/** The headers a GET or HEAD of a file of `contentType` adds: the sandbox for active types, nothing else. */
export function activeContentHeaders(contentType: string, sandbox: ActiveFileSandbox = DEFAULT_ACTIVE_FILE_SANDBOX): [string, string][] {
  return isActiveContentType(contentType) ? [["Content-Security-Policy", ACTIVE_FILE_CSP[sandbox]]] : [];
}
