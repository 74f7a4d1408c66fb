import { AppError } from "@vw/service-kit";
import type { Logger } from "@vw/service-kit";
import { LRUCache } from "lru-cache";

/** The world a valid key belongs to. */
export interface KeyPrincipal {
  keyId: string;
  worldId: string;
  organization: string;
  world: string;
  customDomain: string | null;
}

/** Looks a key up by the SHA-256 of its token; `null` when unknown or revoked. */
export interface ApiKeyLookup {
  findActiveKey(tokenHash: string): Promise<KeyPrincipal | null>;
  touch(keyId: string, at: Date): Promise<void>;
}

export interface ApiKeyAuthOptions {
  /** How long a lookup (found or not) is trusted; a revoked key stops working within this time. */
  cacheTtlMs: number;
  /** How often last-used time is written per key. */
  touchEveryMs: number;
  hash: (token: string) => string;
  now?: () => number;
}

const REALM = 'Bearer realm="map-storage"';
// RFC 6750 token68 characters.
const BEARER = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i;

function unauthorized(detail: string, invalidToken: boolean): AppError {
  return new AppError(401, invalidToken ? "invalid-token" : "missing-token", detail, {
    headers: { "WWW-Authenticate": invalidToken ? `${REALM}, error="invalid_token"` : REALM },
  });
}

/**
 * Checks `Authorization: Bearer <API_KEY>` against the database with a short cache (positive and
 * negative), concurrent lookups of one key sharing a query. Tokens are only held hashed.
 */
export class ApiKeyAuthenticator {
  private readonly cache: LRUCache<string, { principal: KeyPrincipal | null }>;
  private readonly inflight = new Map<string, Promise<KeyPrincipal | null>>();
  private readonly touched = new LRUCache<string, number>({ max: 50_000 });
  private readonly now: () => number;

  constructor(
    private readonly lookup: ApiKeyLookup,
    private readonly options: ApiKeyAuthOptions,
    private readonly logger: Logger,
  ) {
    this.now = options.now ?? Date.now;
    this.cache = new LRUCache({ max: 50_000, ttl: options.cacheTtlMs, ttlAutopurge: false, ttlResolution: 0, perf: { now: () => this.now() } });
  }

  /** Resolves the principal of the request's key; throws 401 (with `WWW-Authenticate`) otherwise. */
  async authenticate(authorization: string | undefined): Promise<KeyPrincipal> {
    if (authorization === undefined || authorization.trim() === "") {
      throw unauthorized("This request needs 'Authorization: Bearer <API_KEY>'.", false);
    }
    const m = BEARER.exec(authorization.trim());
    if (!m || !m[1]) throw unauthorized("The Authorization header must be 'Bearer <API_KEY>'.", true);
    const tokenHash = this.options.hash(m[1]);
    const principal = await this.resolve(tokenHash);
    if (!principal) throw unauthorized("The API key is unknown or has been revoked.", true);
    this.maybeTouch(principal.keyId);
    return principal;
  }

  private async resolve(tokenHash: string): Promise<KeyPrincipal | null> {
    const hit = this.cache.get(tokenHash);
    if (hit) return hit.principal;
    let pending = this.inflight.get(tokenHash);
    if (!pending) {
      pending = this.lookup.findActiveKey(tokenHash).finally(() => this.inflight.delete(tokenHash));
      this.inflight.set(tokenHash, pending);
    }
    const principal = await pending;
    this.cache.set(tokenHash, { principal });
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
