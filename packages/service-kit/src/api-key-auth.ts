import { LRUCache } from "lru-cache";
import type { AuthThrottle } from "./auth-throttle.js";
import { AppError } from "./errors.js";
import type { Logger } from "./logger.js";

/**
 * Looks a key up by the hash of its token; `null` when unknown or revoked. `P` is what a valid
 * key stands for (for world API keys, `ApiKeyPrincipal` of @vw/db, whose `ApiKeyStore`
 * implements this).
 */
export interface ApiKeyLookup<P extends { keyId: string }> {
  findActiveKey(tokenHash: string): Promise<P | null>;
  touch(keyId: string, at: Date): Promise<void>;
}

/** Options of {@link ApiKeyAuthenticator}. */
export interface ApiKeyAuthOptions {
  /** `realm` of `WWW-Authenticate`: the service name. */
  realm: string;
  /** How long a lookup (found or not) is trusted; a revoked key stops working within this time. 0: not cached. */
  cacheTtlMs: number;
  /** How often last-used time is written per key. */
  touchEveryMs: number;
  hash: (token: string) => string;
  now?: () => number;
  /** Counts unknown keys per client and refuses throttled clients (429); none: never throttled. */
  throttle?: AuthThrottle;
}

// RFC 6750 token68 characters.
const BEARER = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i;

function unauthorized(realm: string, detail: string, invalidToken: boolean): AppError {
  const challenge = `Bearer realm="${realm}"`;
  return new AppError(401, invalidToken ? "invalid-token" : "missing-token", detail, {
    headers: { "WWW-Authenticate": invalidToken ? `${challenge}, error="invalid_token"` : challenge },
  });
}

/**
 * Checks `Authorization: Bearer <API_KEY>` against the database with a short cache (positive and
 * negative), concurrent lookups of one key sharing a query. Tokens are only held hashed and never
 * logged. Shared by every service that accepts world API keys (map-storage, admin-api's Inbound
 * API), so a key means the same everywhere.
 */
export class ApiKeyAuthenticator<P extends { keyId: string }> {
  private readonly cache: LRUCache<string, { principal: P | null }>;
  private readonly inflight = new Map<string, Promise<P | null>>();
  private readonly touched = new LRUCache<string, number>({ max: 50_000 });
  private readonly now: () => number;

  constructor(
    private readonly lookup: ApiKeyLookup<P>,
    private readonly options: ApiKeyAuthOptions,
    private readonly logger: Logger,
  ) {
    this.now = options.now ?? Date.now;
    this.cache = new LRUCache({ max: 50_000, ttl: options.cacheTtlMs, ttlAutopurge: false, ttlResolution: 0, perf: { now: () => this.now() } });
  }

  /**
   * Resolves the principal of the request's key; throws 401 (with `WWW-Authenticate`) otherwise.
   * `client` is the caller's address (`clientAddress(req)`), by which failures are throttled; null
   * only for a caller that is not a network client.
   */
  async authenticate(authorization: string | undefined, client: string | null): Promise<P> {
    const throttle = this.options.throttle;
    if (throttle === undefined || client === null) return this.check(authorization);
    return throttle.guard(client, () => this.check(authorization), undefined, authorization);
  }

  /**
   * {@link authenticate} on a route that also takes another credential (map-storage's room listing
   * takes the operator's token): `alternative` looks at the `Authorization` header first and
   * returns what it stands for, or null to have the header checked as an API key. Both are checked
   * under the one throttle, so a throttled client can try neither, and a header that is neither
   * counts as one failure.
   */
  async authenticateOr<A>(authorization: string | undefined, client: string | null, alternative: (authorization: string | undefined) => A | null): Promise<P | A> {
    const check = async (): Promise<P | A> => alternative(authorization) ?? (await this.check(authorization));
    const throttle = this.options.throttle;
    if (throttle === undefined || client === null) return check();
    return throttle.guard(client, check, undefined, authorization);
  }

  private async check(authorization: string | undefined): Promise<P> {
    const realm = this.options.realm;
    if (authorization === undefined || authorization.trim() === "") {
      throw unauthorized(realm, "This request needs 'Authorization: Bearer <API_KEY>'.", false);
    }
    const m = BEARER.exec(authorization.trim());
    if (!m || !m[1]) throw unauthorized(realm, "The Authorization header must be 'Bearer <API_KEY>'.", true);
    const tokenHash = this.options.hash(m[1]);
    const principal = await this.resolve(tokenHash);
    if (!principal) throw unauthorized(realm, "The API key is unknown or has been revoked.", true);
    this.maybeTouch(principal.keyId);
    return principal;
  }

  private async resolve(tokenHash: string): Promise<P | null> {
    const hit = this.cache.get(tokenHash);
    if (hit) return hit.principal;
    let pending = this.inflight.get(tokenHash);
    if (!pending) {
      pending = this.lookup.findActiveKey(tokenHash).finally(() => this.inflight.delete(tokenHash));
      this.inflight.set(tokenHash, pending);
    }
    const principal = await pending;
    // lru-cache reads a ttl of 0 as "never expires": 0 must mean "do not cache".
    if (this.options.cacheTtlMs > 0) this.cache.set(tokenHash, { principal });
    return principal;
  }

  private maybeTouch(keyId: string): void {
    const now = this.now();
    const last = this.touched.get(keyId);
    if (last !== undefined && now - last < this.options.touchEveryMs) return;
    this.touched.set(keyId, now);
    this.lookup.touch(keyId, new Date(now)).catch((err: unknown) => {
      this.logger.warn({ err, keyId }, "could not record API key last-used time");
    });
  }
}
