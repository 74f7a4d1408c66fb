/**
 * The one reader of a world by its slugs (`<organization>/<world>`), for every service: event
 * intake, analytics, the auth hook, member intake, map-storage and admin-api all resolve a world
 * here, and the statements that must resolve one inside themselves (the intake's batch, the auth
 * hook's world-and-endpoints read) embed {@link worldsBySlugs} instead of writing the join again.
 * Worlds are created and changed only by admin-api's worlds service; this only reads them.
 */
import type { SqlRunner, Statement } from "./delivery-log/sql-runner.js";
import { Prisma } from "./generated/prisma/client.js";

/** A world as the services read it by its slugs. */
export interface WorldEntry {
  id: string;
  organizationId: string;
  organizationSlug: string;
  slug: string;
  /** The world's custom domain (room URLs are then `https://<domain>/@/<path>`), or null. */
  customDomain: string | null;
  /** `identity_providers` as stored (JSON). */
  identityProviders: unknown;
  /** `analytics` settings as stored (JSON). */
  analytics: unknown;
  /** The world's own ANALYTICS_BUFFER_MAX_PER_WORLD, or null. */
  analyticsBufferMax: number | null;
}

/** What map-storage needs to know of a world (is there such a world, what is its room URL base). */
export interface WorldSummary {
  worldId: string;
  customDomain: string | null;
}

/** A slug as admin-api accepts it (@vw/contracts' SLUG_PATTERN): any other name names no world. */
const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * The worlds named by two parallel text arrays of slugs (`orgs`, `worlds`: SQL expressions such as
 * `$1::text[]`), as a FROM item with the columns `id`, `organization_id`, `org_slug`, `world_slug`,
 * `custom_domain`, `identity_providers`, `analytics`, `analytics_buffer_max`, `max_storage_bytes`. Each world once,
 * however often it is named. The one place the join of `organizations` and `worlds` on slugs is
 * written.
 */
export function worldsBySlugs(orgs: string, worlds: string): string {
  return `(SELECT w.id, o.id AS organization_id, o.slug AS org_slug, w.slug AS world_slug, w.custom_domain, w.identity_providers,
            w.analytics, w.analytics_buffer_max, w.max_storage_bytes
     FROM (SELECT DISTINCT org, world FROM unnest(${orgs}, ${worlds}) AS r(org, world)) r
     JOIN organizations o ON o.slug = r.org
     JOIN worlds w ON w.organization_id = o.id AND w.slug = r.world)`;
}

/**
 * {@link worldsBySlugs} for one world, as a Prisma SQL fragment with the two slugs bound: for the
 * statements written with Prisma's tagged templates (the world storage ledger's).
 */
export function worldBySlugsSql(organization: string, world: string): Prisma.Sql {
  const [before, between, after] = worldsBySlugs("\u0000", "\u0000").split("\u0000") as [string, string, string];
  return new Prisma.Sql([`${before}ARRAY[`, `::text]${between}ARRAY[`, `::text]${after}`], [organization, world]);
}

const FIND_WORLD: Statement = {
  name: "vw_world_by_slugs",
  text: `SELECT id, organization_id AS "organizationId", org_slug AS "organizationSlug", world_slug AS slug, custom_domain AS "customDomain",
            identity_providers AS "identityProviders", analytics, analytics_buffer_max AS "analyticsBufferMax"
     FROM ${worldsBySlugs("ARRAY[$1::text]", "ARRAY[$2::text]")} w`,
};

// The row lock of a settings patch: read-merge-write of the world's JSON settings.
const LOCK_WORLD: Statement = {
  name: "vw_world_by_slugs_lock",
  text: `SELECT w.id FROM worlds w WHERE w.id = (SELECT id FROM ${worldsBySlugs("ARRAY[$1::text]", "ARRAY[$2::text]")} n) FOR UPDATE OF w`,
};

/** Resolves worlds by their slugs; build one per process over its runner. */
export class WorldDirectory {
  constructor(private readonly sql: SqlRunner) {}

  /** The world `organization/world`, or null when there is none (a name that is not a slug never reaches the database). */
  async find(organization: string, world: string, tx: SqlRunner = this.sql): Promise<WorldEntry | null> {
    if (!SLUG.test(organization) || !SLUG.test(world)) return null;
    const [row] = await tx.query<WorldEntry>(FIND_WORLD, [organization, world]);
    return row ?? null;
  }

  /** The world's id, or null. */
  async idOf(organization: string, world: string, tx: SqlRunner = this.sql): Promise<string | null> {
    return (await this.find(organization, world, tx))?.id ?? null;
  }

  /** map-storage's view of {@link find}. */
  async findWorld(organization: string, world: string): Promise<WorldSummary | null> {
    const found = await this.find(organization, world);
    return found ? { worldId: found.id, customDomain: found.customDomain } : null;
  }

  /** Locks the world's row in `tx` (a transaction) until it ends; its id, or null when there is no such world. */
  async lock(organization: string, world: string, tx: SqlRunner): Promise<string | null> {
    if (!SLUG.test(organization) || !SLUG.test(world)) return null;
    const [row] = await tx.query<{ id: string }>(LOCK_WORLD, [organization, world]);
    return row?.id ?? null;
  }
}
