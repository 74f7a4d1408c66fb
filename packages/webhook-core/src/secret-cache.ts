/**
 * Opened endpoint secrets, so a delivery does not pay an AES-GCM open (a decipher object and a
 * key schedule) per attempt. Keyed by endpoint and checked against the sealed value itself: a
 * rotation, or a re-seal under a new key, stores a different sealed string (fresh IV), so a stale
 * secret is never served. Used by the worker and the auth hook.
 */
import type { SecretBox } from "./secret-box.js";

/** Most endpoints kept; past it the cache starts over (a re-open is cheap, an unbounded map is not). */
export const SECRET_CACHE_MAX = 10_000;

export class SecretCache {
  private readonly cache = new Map<string, { sealed: string; secret: string }>();

  constructor(
    private readonly box: SecretBox,
    private readonly max = SECRET_CACHE_MAX,
  ) {}

  /**
   * The plain secret of `sealed` (null for an endpoint without one, a legacy endpoint). Throws
   * {@link SecretBoxError} as {@link SecretBox.open} does when it cannot be opened; a failure is
   * not cached.
   */
  secretOf(endpointId: string, sealed: string | null): string | null {
    if (sealed === null) return null;
    const hit = this.cache.get(endpointId);
    if (hit !== undefined && hit.sealed === sealed) return hit.secret;
    const secret = this.box.open(sealed);
    if (this.cache.size >= this.max && hit === undefined) this.cache.clear();
    this.cache.set(endpointId, { sealed, secret });
    return secret;
  }

  /** Endpoints held (for tests and metrics). */
  get size(): number {
    return this.cache.size;
  }
}
