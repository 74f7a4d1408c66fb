/**
 * An endpoint's custom headers on their way from the database to the wire: sealed at rest like
 * the secret (one sealed JSON object per endpoint, so a set is replaced or cleared in one write),
 * opened by the sender, and redacted in what the attempt log records. The rules on names and
 * values (`endpointHeadersErrors`, `isReservedHeaderName`) are in @vw/contracts, which the admin
 * API validates with.
 */
import { isReservedHeaderName, type EndpointHeaders } from "@vw/contracts";
import { SecretBoxError, type SecretBox } from "./secret-box.js";

/** What the delivery history shows in place of a custom header's value. */
export const REDACTED_HEADER_VALUE = "[redacted]";

/** Seals a set of headers for the `headers_sealed` column; null for an empty set (no column value to open). */
export function sealEndpointHeaders(box: SecretBox, headers: EndpointHeaders): string | null {
  return Object.keys(headers).length === 0 ? null : box.seal(JSON.stringify(headers));
}

/**
 * Opens what {@link sealEndpointHeaders} sealed (null: no headers).
 * @throws SecretBoxError as {@link SecretBox.open} does, or `malformed` when the plain text is not an object of strings
 */
export function openEndpointHeaders(box: SecretBox, sealed: string | null): EndpointHeaders {
  if (sealed === null) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(box.open(sealed));
  } catch (err) {
    if (err instanceof SecretBoxError) throw err;
    throw new SecretBoxError("malformed", "sealed headers are not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || !Object.values(parsed).every((v) => typeof v === "string")) {
    throw new SecretBoxError("malformed", "sealed headers are not an object of strings");
  }
  return parsed as EndpointHeaders;
}

/**
 * The custom headers that may go on the wire: every reserved name left out. The admin API refuses
 * them already; this keeps a stored set (one saved before a name became reserved) from ever
 * overriding what the platform sets, such as the signature or the framing.
 */
export function sendableHeaders(headers: Readonly<EndpointHeaders> | undefined): EndpointHeaders {
  const out: EndpointHeaders = {};
  if (headers === undefined) return out;
  for (const [name, value] of Object.entries(headers)) if (!isReservedHeaderName(name)) out[name] = value;
  return out;
}

/** The same names with {@link REDACTED_HEADER_VALUE}: what the attempt log keeps of them. */
export function redactedHeaders(headers: Readonly<EndpointHeaders>): EndpointHeaders {
  return Object.fromEntries(Object.keys(headers).map((name) => [name, REDACTED_HEADER_VALUE]));
}
