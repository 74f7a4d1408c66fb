/**
 * A world's storage quota (MAX_STORAGE_BYTES_PER_WORLD, or the operator's `quotas.maxStorageBytes`)
 * over the count of its bytes in PostgreSQL (`WorldStorageLedger` of @vw/db, which owns the
 * table; docs/decisions/0016). A world without a count yet (it predates the count, or was never
 * written) is counted once, by listing its objects, under a Redis lease so that replicas do not
 * count it twice; from then on every write and deletion keeps the count.
 */
import { AppError, type Logger } from "@vw/service-kit";
import type { WorldSlugs, WorldStorageLedger } from "@vw/db";
import type { WorldRef, WorldStorage } from "../files/world-storage.js";
import type { ObjectStore } from "./object-store.js";
import type { FileLocks } from "./redis-lock.js";

const GiB = 1024 ** 3;
const readable = (bytes: number) => (bytes >= GiB ? `${(bytes / GiB).toFixed(2)} GiB` : `${(bytes / 1024 ** 2).toFixed(1)} MiB`);

/** {@link WorldStorage} over the ledger; see the file comment. */
export class StorageUsage implements WorldStorage {
  constructor(
    private readonly ledger: WorldStorageLedger,
    private readonly store: ObjectStore,
    private readonly locks: FileLocks,
    private readonly defaultLimit: number,
    private readonly logger: Logger,
  ) {}

  async reserve(world: WorldRef, bytes: number): Promise<void> {
    const slugs = slugsOf(world);
    let answer = await this.ledger.reserve(slugs, bytes, this.defaultLimit);
    if (answer.kind === "uncounted") {
      await this.count(slugs);
      answer = await this.ledger.reserve(slugs, bytes, this.defaultLimit);
    }
    if (answer.kind === "unknown-world") throw new AppError(404, "unknown-world", `There is no world '${slugs.organization}/${slugs.world}'.`);
    if (answer.kind !== "over") return;
    throw new AppError(
      413,
      "quota-exceeded",
      `This would take the world past its storage quota: it stores ${answer.bytesInUse} bytes (${readable(answer.bytesInUse)}) of ${answer.limit} (${readable(answer.limit)}), and this write adds ${bytes}. Nothing was stored; delete files or ask the operator to raise quotas.maxStorageBytes.`,
      { quota: "maxStorageBytes", limit: answer.limit, bytesInUse: answer.bytesInUse },
    );
  }

  /**
   * Bytes freed, given back or written by an upload: after the fact, so a failure here must not
   * fail the request whose write is done. It is logged; the count then errs high until the next
   * recount (never low for a reservation, which was taken before the write).
   */
  async adjust(world: WorldRef, bytes: number): Promise<void> {
    if (bytes === 0) return;
    const slugs = slugsOf(world);
    try {
      // Not counted yet: the listing sees the world as it is now, this change included.
      if (!(await this.ledger.adjust(slugs, bytes))) await this.count(slugs);
    } catch (err) {
      this.logger.warn({ err, world: `${slugs.organization}/${slugs.world}`, bytes }, "storage count: could not record bytes freed or written; the count is high until recounted");
    }
  }

  /** Counts a world that has no count yet: its objects listed and summed, once across replicas. */
  async count(slugs: WorldSlugs): Promise<void> {
    await this.locks.withLock(
      `usage-count:${slugs.organization}/${slugs.world}`,
      async () => {
        const prefix = `${slugs.organization}/${slugs.world}/`;
        let bytes = 0;
        let after: string | undefined;
        for (;;) {
          const page = await this.store.list(prefix, after, 1000);
          for (const { size } of page.keys) bytes += size;
          const last = page.keys[page.keys.length - 1];
          if (!page.truncated || !last) break;
          after = last.key;
        }
        // A count started meanwhile by another replica is kept (ON CONFLICT DO NOTHING).
        await this.ledger.initialize(slugs, bytes);
      },
      { renew: true, waitMs: 120_000, busyDetail: "The world's storage is being counted; retry shortly." },
    );
  }

  /**
   * Counts every world without a count yet (at start-up, in the background), so the admin API shows
   * bytes in use for worlds nobody has written to since the count existed. Resolves with how many.
   */
  async countUncounted(): Promise<number> {
    let counted = 0;
    for (;;) {
      const worlds = await this.ledger.uncounted(100);
      if (worlds.length === 0) return counted;
      for (const slugs of worlds) {
        await this.count(slugs);
        counted++;
      }
    }
  }
}

const slugsOf = (world: WorldRef): WorldSlugs => ({ organization: world.organization, world: world.world });
