/**
 * An in-process cache of what the auth hook reads for a world (its address, identity providers and
 * enabled `auth` endpoints), kept exact by PostgreSQL change notifications: the migration
 * `hook_target_notify` makes every committed change to an endpoint, a world's settings or an
 * organization's slug send NOTIFY `vw_world_settings` with the world's id (`*` for an
 * organization), and {@link WorldSettingsListener} evicts on each one.
 *
 * Rules that keep it from ever serving a disabled or edited endpoint longer than the notification
 * takes to arrive (about a millisecond on the same network):
 * - it caches only while its LISTEN connection is up; when that connection fails it is emptied and
 *   bypassed (every call reads the database) until LISTEN succeeds again;
 * - a read that started before an invalidation is not stored (generation check), so a change
 *   committed while a read was in flight cannot be cached over;
 * - entries expire after {@link WorldSettingsCacheOptions.maxAgeMs} anyway (a connection that died
 *   without the client noticing), unknown worlds are never cached, and the size is bounded.
 * The LISTEN connection goes to DIRECT_URL (PostgreSQL itself: a transaction-pooling PgBouncer
 * cannot hold one), outside the pool's DATABASE_POOL_MAX. Should it never come up, the hook simply
 * reads the database each time.
 */
import { createPgClient, type DatabaseTarget, type PgClient, type PgNotification } from "@vw/db";
import { dependencyStatus, type Logger } from "@vw/service-kit";

/** The notification channel the migration's triggers send on. */
export const WORLD_SETTINGS_CHANNEL = "vw_world_settings";

/** Options of {@link WorldSettingsCache}. */
export interface WorldSettingsCacheOptions {
  /** Oldest entry served, in ms (60 s by default). */
  maxAgeMs?: number;
  /** Most worlds held; the oldest is dropped beyond (10,000 by default). */
  maxEntries?: number;
  /** Monotonic clock in ms; `performance.now` by default. */
  now?: () => number;
}

/** Cached values carry the world's id so a change notification can find them. */
export interface WorldScoped {
  world_id: string;
}

export class WorldSettingsCache<T extends WorldScoped> {
  private readonly entries = new Map<string, { value: T; at: number }>();
  private readonly maxAgeMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  private active = false;
  /** Bumped by every invalidation and state change; reads compare it before storing. */
  private generation = 0;
  hits = 0;
  misses = 0;

  constructor(options: WorldSettingsCacheOptions = {}) {
    this.maxAgeMs = options.maxAgeMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? (() => performance.now());
  }

  /** Whether entries are served and stored (the listener is up). */
  get isActive(): boolean {
    return this.active;
  }

  /** The entry for `key`, or undefined (and a miss counted). */
  get(key: string): T | undefined {
    const entry = this.entries.get(key);
    if (entry !== undefined && this.now() - entry.at <= this.maxAgeMs) {
      this.hits += 1;
      return entry.value;
    }
    if (entry !== undefined) this.entries.delete(key);
    this.misses += 1;
    return undefined;
  }

  /** Whether `key` is held and fresh, without counting a hit or a miss. */
  has(key: string): boolean {
    const entry = this.entries.get(key);
    return entry !== undefined && this.now() - entry.at <= this.maxAgeMs;
  }

  /** Take before a read; give it to {@link set} after. */
  snapshot(): number {
    return this.generation;
  }

  /** Stores a read, unless the cache is inactive or something changed since `snapshot`. */
  set(key: string, value: T, snapshot: number): void {
    if (!this.active || snapshot !== this.generation) return;
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, at: this.now() });
  }

  /** A world changed (`*`: any world may have). */
  invalidate(worldId: string): void {
    this.generation += 1;
    if (worldId === "*") {
      this.entries.clear();
      return;
    }
    for (const [key, entry] of this.entries) if (entry.value.world_id === worldId) this.entries.delete(key);
  }

  /** Turns caching on (the listener is up) or off (it is down: emptied, nothing stored). */
  setActive(active: boolean): void {
    this.generation += 1;
    this.entries.clear();
    this.active = active;
  }
}

/**
 * Holds a LISTEN connection on {@link WORLD_SETTINGS_CHANNEL} and feeds its notifications to a
 * cache; reconnects with backoff (`retryBaseMs`, 100 ms, doubling to 5 s) after any failure.
 */
export class WorldSettingsListener {
  private client: PgClient | null = null;
  private stopped = false;
  private retryMs: number;
  private readonly retryBaseMs: number;
  private retryTimer: NodeJS.Timeout | null = null;
  /** Process id of the listening backend, while connected (tests terminate it). */
  backendPid: number | null = null;

  constructor(
    /** DATABASE_URL's settings (the LISTEN goes to their DIRECT_URL), or a URL. */
    private readonly database: DatabaseTarget,
    private readonly cache: WorldSettingsCache<WorldScoped>,
    private readonly logger: Logger,
    options: { retryBaseMs?: number } = {},
  ) {
    this.retryBaseMs = options.retryBaseMs ?? 100;
    this.retryMs = this.retryBaseMs;
  }

  /** Resolves after the first connection attempt, successful or not (failures retry in the background). */
  start(): Promise<void> {
    return this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.cache.setActive(false);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = createPgClient(this.database);
    let failed = false;
    const fail = (err: Error | null): void => {
      if (failed || this.stopped) return;
      failed = true;
      this.cache.setActive(false);
      this.backendPid = null;
      if (this.client === client) this.client = null;
      void client.end().catch(() => undefined);
      // One line per outage (shared with the process's other PostgreSQL clients), not one per retry.
      dependencyStatus(this.logger, "postgresql").down(err ?? new Error("connection closed"), {
        client: "world settings listener",
        effect: "the auth hook reads the database on every call until it is back",
      });
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        void this.connect();
      }, this.retryMs);
      this.retryMs = Math.max(this.retryMs, Math.min(5_000, this.retryMs * 2));
    };
    client.on("error", (err: Error) => fail(err));
    client.on("end", () => fail(null));
    client.on("notification", (msg: PgNotification) => {
      if (msg.channel === WORLD_SETTINGS_CHANNEL) this.cache.invalidate(msg.payload ?? "*");
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${WORLD_SETTINGS_CHANNEL}`);
      const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      if (failed || this.stopped) return;
      this.client = client;
      this.backendPid = rows[0]?.pid ?? null;
      this.retryMs = this.retryBaseMs;
      dependencyStatus(this.logger, "postgresql").up({ client: "world settings listener" });
      // Only now: a change committed before LISTEN took effect was never notified, and the cache is empty.
      this.cache.setActive(true);
    } catch (err) {
      fail(err as Error);
    }
  }
}
