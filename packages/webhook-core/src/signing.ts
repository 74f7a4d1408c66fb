/**
 * Standard Webhooks signing (spec: Authentication > Webhook deliveries).
 *
 * The signature is `v1,` + base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`,
 * keyed with the base64-decoded part of the `whsec_` secret. It is computed over the exact bytes
 * that go on the wire, so a receiver that re-serialises the JSON cannot verify: that is intended.
 */
import { createHmac, createSecretKey, randomBytes, type KeyObject } from "node:crypto";

/** Prefix every endpoint secret carries, as displayed to the customer. */
export const SECRET_PREFIX = "whsec_";

/** Key sizes allowed by the Standard Webhooks scheme (bytes, after base64 decoding). */
export const MIN_SECRET_BYTES = 24;
export const MAX_SECRET_BYTES = 64;

/** Default key size for new secrets: 32 bytes, the HMAC-SHA256 block-friendly size most providers use. */
export const DEFAULT_SECRET_BYTES = 32;

/** Thrown when a secret does not have the `whsec_<base64 of 24..64 bytes>` shape. */
export class WebhookSecretError extends Error {
  override readonly name = "WebhookSecretError";
  readonly code = "invalid-webhook-secret";
  constructor(detail: string) {
    // The message never contains the secret itself: it may end up in logs.
    super(`invalid webhook secret: ${detail}`);
  }
}

/**
 * Creates a new endpoint secret: `whsec_` + standard base64 (with padding) of `bytes` random
 * bytes from the OS CSPRNG.
 *
 * @param bytes key length, 24 to 64 (default 32)
 */
export function generateSecret(bytes: number = DEFAULT_SECRET_BYTES): string {
  if (!Number.isInteger(bytes) || bytes < MIN_SECRET_BYTES || bytes > MAX_SECRET_BYTES) {
    throw new RangeError(`secret length must be an integer from ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes`);
  }
  return SECRET_PREFIX + randomBytes(bytes).toString("base64");
}

/**
 * Validates a `whsec_` secret and returns the HMAC key it carries.
 *
 * Only canonical standard base64 with padding is accepted, because that is what the reference
 * receiver libraries decode: a secret they cannot decode would make every delivery unverifiable.
 *
 * @throws WebhookSecretError when the prefix, the base64 text or the key length is wrong
 */
export function parseSecret(secret: string): Buffer {
  if (typeof secret !== "string" || !secret.startsWith(SECRET_PREFIX)) {
    throw new WebhookSecretError(`it must start with "${SECRET_PREFIX}"`);
  }
  const encoded = secret.slice(SECRET_PREFIX.length);
  // Buffer.from(..., "base64") silently skips invalid characters, so the text is checked first
  // and the decoded key re-encoded to reject non-canonical spellings.
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) {
    throw new WebhookSecretError("the part after the prefix is not standard base64");
  }
  const key = Buffer.from(encoded, "base64");
  if (key.toString("base64") !== encoded) {
    throw new WebhookSecretError("the part after the prefix is not canonical, padded base64");
  }
  if (key.length < MIN_SECRET_BYTES || key.length > MAX_SECRET_BYTES) {
    throw new WebhookSecretError(`the key must be ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes, got ${key.length}`);
  }
  return key;
}

/** Secrets' HMAC keys kept at most (the cache is emptied when full, as the worker's secret cache is). */
const HMAC_KEYS_MAX = 10_000;
const hmacKeys = new Map<string, KeyObject>();

/**
 * The HMAC key of a secret as a KeyObject, parsed once per secret. `createHmac` with a Buffer key
 * wraps it in a key object on every call, which on Node 24 costs several times the HMAC of a
 * small body itself; a KeyObject is used as it is.
 */
function hmacKeyOf(secret: string): KeyObject {
  let key = hmacKeys.get(secret);
  if (key === undefined) {
    key = createSecretKey(parseSecret(secret));
    if (hmacKeys.size >= HMAC_KEYS_MAX) hmacKeys.clear();
    hmacKeys.set(secret, key);
  }
  return key;
}

/** What {@link sign} signs. */
export interface SignInput {
  /** The `webhook-id` header value (the delivery's `deliveryId`). */
  id: string;
  /** The `webhook-timestamp` header value: Unix time in whole seconds of this attempt. */
  timestamp: number;
  /** The raw request body, byte for byte as sent. */
  body: Buffer | string;
  /** The endpoint secret as displayed (`whsec_...`). */
  secret: string;
}

/**
 * Computes the `webhook-signature` header value: `v1,<base64 HMAC-SHA256>`.
 *
 * @throws WebhookSecretError for a malformed secret; RangeError for a non-integer timestamp
 */
export function sign({ id, timestamp, body, secret }: SignInput): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new RangeError("timestamp must be a non-negative integer number of seconds");
  }
  const hmac = createHmac("sha256", hmacKeyOf(secret));
  // Fed in pieces so a Buffer body is hashed as raw bytes, never decoded and re-encoded.
  hmac.update(`${id}.${timestamp}.`, "utf8");
  hmac.update(typeof body === "string" ? Buffer.from(body, "utf8") : body);
  return `v1,${hmac.digest("base64")}`;
}

/** What {@link signatureHeaders} needs for one attempt. */
export interface SignatureHeadersInput {
  /** The delivery's `deliveryId`; becomes `webhook-id` (the same on every retry and replay). */
  deliveryId: string;
  /** The stored body bytes sent by this attempt. */
  body: Buffer | string;
  /** The endpoint's current secret, or null for a legacy endpoint that never had one. */
  secret: string | null;
  /** The attempt's clock; injectable so tests and attempt logs agree on the timestamp. */
  now?: Date;
}

/**
 * Builds the headers of one delivery attempt: `content-type`, `webhook-id`, `webhook-timestamp`
 * and, only when the endpoint has a secret, `webhook-signature`.
 *
 * Header names are lower case because some receiver libraries only look them up that way.
 */
export function signatureHeaders({ deliveryId, body, secret, now = new Date() }: SignatureHeadersInput): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "webhook-id": deliveryId,
    "webhook-timestamp": String(timestamp),
  };
  if (secret !== null) {
    headers["webhook-signature"] = sign({ id: deliveryId, timestamp, body, secret });
  }
  return headers;
}
