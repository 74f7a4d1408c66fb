/**
 * Encryption at rest for endpoint secrets (AES-256-GCM), configured by `SECRETS_ENCRYPTION_KEY`.
 *
 * Sealed format: `v1:<kid>:<iv>:<tag>:<ciphertext>`, every part base64url without padding.
 * - `kid` is derived from the key (a truncated SHA-256), so a sealed value names the key that can
 *   open it without the database storing any key material or key index.
 * - The IV is 12 random bytes per seal (never reused with one key at these volumes).
 * - `v1:<kid>` is bound as additional authenticated data, so swapping the header is detected.
 *
 * Rotation: the variable holds a comma-separated list of base64 keys. The first one seals; all
 * of them open. To rotate, put the new key first, re-seal what {@link SecretBox.needsReseal}
 * reports, then drop the old key.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

const VERSION = "v1";
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KID_BYTES = 6;

/** Why a secret box could not be built or a value could not be opened. */
export type SecretBoxErrorCode = "invalid-key" | "malformed" | "unknown-key" | "tampered";

/** Thrown by {@link createSecretBox} and {@link SecretBox.open}. Messages never carry key or plain text. */
export class SecretBoxError extends Error {
  override readonly name = "SecretBoxError";
  constructor(
    readonly code: SecretBoxErrorCode,
    detail: string,
  ) {
    super(detail);
  }
}

/** Seals and opens small secrets with the configured keys. */
export interface SecretBox {
  /** Encrypts `plain` with the first (primary) key and a fresh random IV. */
  seal(plain: string): string;
  /**
   * Decrypts a value sealed by any configured key.
   * @throws SecretBoxError `malformed`, `unknown-key` (no configured key has its kid) or `tampered`
   */
  open(sealed: string): string;
  /** True when `sealed` was not sealed by the primary key (re-seal it during a rotation). */
  needsReseal(sealed: string): boolean;
  /** Key ids in configuration order; the first one seals. Safe to log. */
  readonly keyIds: readonly string[];
}

interface BoxKey {
  kid: string;
  key: Buffer;
}

/**
 * Builds a secret box from `SECRETS_ENCRYPTION_KEY`: one base64 (or base64url) 32-byte key, or
 * several separated by commas, primary first.
 *
 * @throws SecretBoxError `invalid-key` naming the position of the bad key (never its value)
 */
export function createSecretBox(keysBase64: string | readonly string[]): SecretBox {
  const items = (typeof keysBase64 === "string" ? keysBase64.split(",") : [...keysBase64]).map((k) => k.trim());
  if (items.length === 0 || items.every((k) => k === "")) {
    throw new SecretBoxError("invalid-key", "no encryption key configured");
  }
  const keys = items.map((item, index) => decodeKey(item, index + 1));
  const seen = new Set<string>();
  for (const { kid } of keys) {
    // Same kid means the same key listed twice: a configuration slip worth stopping on.
    if (seen.has(kid)) throw new SecretBoxError("invalid-key", `encryption key ${kid} is listed twice`);
    seen.add(kid);
  }
  const primary = keys[0] as BoxKey;
  const byKid = new Map(keys.map((k) => [k.kid, k.key]));

  return {
    keyIds: Object.freeze(keys.map((k) => k.kid)),
    seal(plain) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", primary.key, iv);
      cipher.setAAD(Buffer.from(`${VERSION}:${primary.kid}`));
      const ciphertext = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
      return [VERSION, primary.kid, b64u(iv), b64u(cipher.getAuthTag()), b64u(ciphertext)].join(":");
    },
    open(sealed) {
      const parts = parseSealed(sealed);
      const key = byKid.get(parts.kid);
      if (!key) throw new SecretBoxError("unknown-key", `sealed with key ${parts.kid}, which is not configured`);
      const decipher = createDecipheriv("aes-256-gcm", key, parts.iv);
      decipher.setAAD(Buffer.from(`${VERSION}:${parts.kid}`));
      decipher.setAuthTag(parts.tag);
      try {
        return Buffer.concat([decipher.update(parts.ciphertext), decipher.final()]).toString("utf8");
      } catch {
        throw new SecretBoxError("tampered", "sealed value failed authentication (tampered or wrong key)");
      }
    },
    needsReseal(sealed) {
      return parseSealed(sealed).kid !== primary.kid;
    },
  };
}

/** Creates a new random key in the format `SECRETS_ENCRYPTION_KEY` expects (standard base64). */
export function generateSecretBoxKey(): string {
  return randomBytes(KEY_BYTES).toString("base64");
}

function decodeKey(text: string, position: number): BoxKey {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) {
    throw new SecretBoxError("invalid-key", `encryption key #${position} is not base64`);
  }
  const key = Buffer.from(text.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  if (key.length !== KEY_BYTES) {
    throw new SecretBoxError("invalid-key", `encryption key #${position} must decode to ${KEY_BYTES} bytes, got ${key.length}`);
  }
  // All zeros (an unfilled template) or any other single byte repeated: nothing random about it.
  if (key.every((byte) => byte === key[0])) {
    throw new SecretBoxError("invalid-key", `encryption key #${position} is one byte repeated (${key[0] === 0 ? "all zeros" : "not random"}); it protects nothing`);
  }
  const kid = b64u(createHash("sha256").update("vw-secret-box-kid\0").update(key).digest().subarray(0, KID_BYTES));
  return { kid, key };
}

function parseSealed(sealed: string): { kid: string; iv: Buffer; tag: Buffer; ciphertext: Buffer } {
  const parts = typeof sealed === "string" ? sealed.split(":") : [];
  const [version, kid, iv, tag, ciphertext] = parts;
  const b64uPart = /^[A-Za-z0-9_-]*$/;
  if (
    parts.length !== 5 ||
    version !== VERSION ||
    kid === undefined || kid === "" || !b64uPart.test(kid) ||
    iv === undefined || !b64uPart.test(iv) ||
    tag === undefined || !b64uPart.test(tag) ||
    ciphertext === undefined || !b64uPart.test(ciphertext)
  ) {
    throw new SecretBoxError("malformed", `not a ${VERSION} sealed value`);
  }
  const ivBytes = Buffer.from(iv, "base64url");
  const tagBytes = Buffer.from(tag, "base64url");
  if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) {
    throw new SecretBoxError("malformed", `not a ${VERSION} sealed value (bad IV or tag length)`);
  }
  return { kid, iv: ivBytes, tag: tagBytes, ciphertext: Buffer.from(ciphertext, "base64url") };
}

function b64u(bytes: Buffer): string {
  return bytes.toString("base64url");
}

/**
 * For configuration checks: why `SECRETS_ENCRYPTION_KEY` cannot build a box, or null when it can.
 * The message names the position of a bad key, never its value.
 */
export function secretBoxKeyProblem(keys: string): string | null {
  try {
    createSecretBox(keys);
    return null;
  } catch (err) {
    if (!(err instanceof SecretBoxError)) throw err;
    return `${err.message} (comma-separated base64 32-byte keys; make one with \`openssl rand -base64 32\`)`;
  }
}
