import type { WorldSummary } from "@vw/db";
import { LRUCache } from "lru-cache";

/** Reads a world by slugs (the `WorldDirectory` of @vw/db). */
export interface WorldLookup {
  findWorld(organization: string, world: string): Promise<WorldSummary | null>;
}

/**
 * Worlds by slugs with a short cache, found or not (`GET {base}/ping` needs no key, so a flood of
 * pings for made-up worlds costs one query per name and TTL, not one per request).
 */
export class WorldCache {
  private readonly cache: LRUCache<string, { world: WorldSummary | null }>;
  private readonly inflight = new Map<string, Promise<WorldSummary | null>>();

  constructor(
    private readonly lookup: WorldLookup,
    ttlMs: number,
  ) {
    this.cache = new LRUCache({ max: 10_000, ttl: Math.max(ttlMs, 1) });
  }

  async find(organization: string, world: string): Promise<WorldSummary | null> {
    const key = `${organization}/${world}`;
    const hit = this.cache.get(key);
    if (hit) return hit.world;
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.lookup.findWorld(organization, world).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    const found = await pending;
    this.cache.set(key, { world: found });
    return found;
  }
}
