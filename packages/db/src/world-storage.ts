import type { PrismaClient } from "./generated/prisma/client.js";
import { worldBySlugsSql } from "./world-directory.js";

/** A world by its slugs, as map-storage addresses it (`<organization>/<world>/<path>`). */
export interface WorldSlugs {
  organization: string;
  world: string;
}

/** What {@link WorldStorageLedger.reserve} did. */
export type StorageReservation =
  | { kind: "reserved" }
  /** Nothing counted: the world would pass its limit. */
  | { kind: "over"; bytesInUse: number; limit: number }
  /** The world has no count yet: count its objects ({@link WorldStorageLedger.initialize}), then try again. */
  | { kind: "uncounted" }
  | { kind: "unknown-world" };

const asNumber = (value: bigint | number | null): number | null => (value === null ? null : Number(value));

/**
 * The bytes each world's files take in S3 (`world_storage_usage`), and the only writer of that
 * table. map-storage keeps the count: every write that grows a world reserves its growth here
 * first, in one conditional UPDATE that also reads the world's limit (the operator's
 * `worlds.max_storage_bytes`, or the platform default), so concurrent writes can never pass the
 * limit together; what a write or deletion frees is taken off after it. admin-api reads the count
 * with the world. See docs/decisions/0016-world-storage-usage-in-postgresql.md.
 */
export class WorldStorageLedger {
  constructor(private readonly prisma: PrismaClient) {}

  /** Counts `bytes` (> 0) more for the world if it stays within its limit (`defaultLimit` unless it has its own). */
  async reserve(slugs: WorldSlugs, bytes: number, defaultLimit: number): Promise<StorageReservation> {
    // One statement, so its three answers come from one snapshot: read after a separate UPDATE,
    // a count another replica started in between would read as a world over its limit.
    const [state] = await this.prisma.$queryRaw<{ reserved: boolean; bytes_used: bigint | null; max_bytes: bigint }[]>`
      WITH w AS (SELECT w.id, COALESCE(w.max_storage_bytes, ${defaultLimit}::bigint) AS max_bytes FROM ${worldBySlugsSql(slugs.organization, slugs.world)} w),
      done AS (
        UPDATE world_storage_usage u SET bytes_used = u.bytes_used + ${bytes}::bigint, updated_at = now()
        FROM w WHERE u.world_id = w.id AND u.bytes_used + ${bytes}::bigint <= w.max_bytes
        RETURNING u.world_id)
      SELECT EXISTS (SELECT 1 FROM done) AS reserved, u.bytes_used, w.max_bytes
      FROM w LEFT JOIN world_storage_usage u ON u.world_id = w.id`;
    if (!state) return { kind: "unknown-world" };
    if (state.reserved) return { kind: "reserved" };
    if (state.bytes_used === null) return { kind: "uncounted" };
    return { kind: "over", bytesInUse: Number(state.bytes_used), limit: Number(state.max_bytes) };
  }

  /**
   * Counts `bytes` (negative: fewer, never below 0) for the world whatever its limit: bytes freed,
   * a reservation given back, an upload's files. False when the world has no count yet.
   */
  async adjust(slugs: WorldSlugs, bytes: number): Promise<boolean> {
    const updated = await this.prisma.$executeRaw`
      UPDATE world_storage_usage u SET bytes_used = GREATEST(0, u.bytes_used + ${bytes}::bigint), updated_at = now()
      FROM ${worldBySlugsSql(slugs.organization, slugs.world)} w
      WHERE u.world_id = w.id`;
    return updated > 0;
  }

  /** Starts the world's count at `bytes` (its objects, listed and summed); a count already there is kept. */
  async initialize(slugs: WorldSlugs, bytes: number): Promise<void> {
    await this.prisma.$executeRaw`
      INSERT INTO world_storage_usage (world_id, bytes_used, counted_at, updated_at)
      SELECT w.id, ${bytes}::bigint, now(), now() FROM ${worldBySlugsSql(slugs.organization, slugs.world)} w
      ON CONFLICT (world_id) DO NOTHING`;
  }

  /** Up to `limit` worlds without a count yet (created before the count existed, never written since). */
  async uncounted(limit: number): Promise<WorldSlugs[]> {
    const rows = await this.prisma.$queryRaw<{ organization: string; world: string }[]>`
      SELECT o.slug AS organization, w.slug AS world
      FROM worlds w JOIN organizations o ON o.id = w.organization_id LEFT JOIN world_storage_usage u ON u.world_id = w.id
      WHERE u.world_id IS NULL ORDER BY w.created_at LIMIT ${limit}`;
    return rows;
  }

  /** The world's bytes in use, by id; null when not counted yet. */
  async bytesInUse(worldId: string): Promise<number | null> {
    const rows = await this.prisma.$queryRaw<{ bytes_used: bigint }[]>`SELECT bytes_used FROM world_storage_usage WHERE world_id = ${worldId}::uuid`;
    return asNumber(rows[0]?.bytes_used ?? null);
  }
}
