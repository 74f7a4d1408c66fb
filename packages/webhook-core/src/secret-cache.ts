/**
 * Opened endpoint secrets and custom headers, so a delivery does not pay an AES-GCM open (a
 * decipher object and a key schedule) per attempt. Keyed by endpoint and checked against the
 * sealed value itself: a rotation, an edit of the headers, or a re-seal under a new key, stores a
 * different sealed string (fresh IV), so a stale value is never served. Used by the worker and
 * the auth hook.
 */
import { openEndpointHeaders } from "./endpoint-headers.js";
import type { SecretBox } from "./secret-box.js";

/** Most endpoints kept; past it the cache starts over (a re-open is cheap, an unbounded map is not). */
export const SECRET_CACHE_MAX = 10_000;

export class SecretCache {
  private readonly secrets: OpenedValues<string>;
  private readonly headers: OpenedValues<Readonly<Record<string, string>>>;

  constructor(box: SecretBox, max = SECRET_CACHE_MAX) {
    this.secrets = new OpenedValues((sealed) => box.open(sealed), max);
    this.headers = new OpenedValues((sealed) => Object.freeze(openEndpointHeaders(box, sealed)), max);
  }

  /**
   * The plain secret of `sealed` (null for an endpoint without one, a legacy endpoint). Throws
   * {@link SecretBoxError} as {@link SecretBox.open} does when it cannot be opened; a failure is
   * not cached.
   */
  secretOf(endpointId: string, sealed: string | null): string | null {
    return sealed === null ? null : this.secrets.of(endpointId, sealed);
  }

  /**
   * The custom headers of `sealed` (the endpoint's `headers_sealed`; null: none), frozen: every
   * attempt of the endpoint shares them. Throws as {@link secretOf}, and as
   * {@link openEndpointHeaders} for a value that is not a header set; a failure is not cached.
   */
  headersOf(endpointId: string, sealed: string | null): Readonly<Record<string, string>> {
    return sealed === null ? NO_HEADERS : this.headers.of(endpointId, sealed);
  }

  /** Endpoints whose secret is held (for tests and metrics). */
  get size(): number {
    return this.secrets.size;
  }
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** One kind of opened value per endpoint, served while the stored sealed value is the same. */
class OpenedValues<T> {
  private readonly cache = new Map<string, { sealed: string; value: T }>();

  constructor(
    private readonly open: (sealed: string) => T,
    private readonly max: number,
  ) {}

  of(endpointId: string, sealed: string): T {
    const hit = this.cache.get(endpointId);
    if (hit !== undefined && hit.sealed === sealed) return hit.value;
    const value = this.open(sealed);
    if (this.cache.size >= this.max && hit === undefined) this.cache.clear();
    this.cache.set(endpointId, { sealed, value });
    return value;
  }

  get size(): number {
    return this.cache.size;
  }
}
