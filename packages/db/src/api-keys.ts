import { createHash, randomBytes } from "node:crypto";

/** Every map-storage API key starts with this, so leaked keys are easy to recognise and scan for. */
export const API_KEY_PREFIX = "vwk_";

/** Characters of a token kept in clear (`tokenPrefix`) so people can tell their keys apart. */
export const API_KEY_DISPLAY_PREFIX_LENGTH = 12;

/** A freshly generated API key: the token is shown once, only its hash is stored. */
export interface GeneratedApiKey {
  token: string;
  tokenHash: string;
  tokenPrefix: string;
}

/** Generates `vwk_` + base64url of 32 random bytes, with the hash and display prefix to store. */
export function generateApiKey(): GeneratedApiKey {
  const token = API_KEY_PREFIX + randomBytes(32).toString("base64url");
  return { token, tokenHash: hashApiKey(token), tokenPrefix: token.slice(0, API_KEY_DISPLAY_PREFIX_LENGTH) };
}

/**
 * Lower-case hex SHA-256 of a token, the value stored in `api_keys.token_hash`. A plain hash
 * (no salt, no slow KDF) is enough: tokens carry 256 random bits, and it keeps lookups indexed.
 */
export function hashApiKey(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}
