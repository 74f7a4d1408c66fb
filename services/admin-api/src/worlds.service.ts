import { Prisma, WorldStorageLedger, prismaRunner, uniqueViolationFields, type Organization, type PrismaClient, type World, type WorldDirectory, type WorldStorageUsage } from "@vw/db";
import { AppError, notFound } from "@vw/service-kit";
import { worldReference } from "@vw/webhook-core";
import {
  DEFAULT_WORLD_ANALYTICS,
  type CreateWorldRequest,
  type ListResource,
  type UpdateWorldRequest,
  type WorldQuotas,
  type WorldResource,
} from "@vw/contracts";
import { slugPage, slugCursor, toPage, type PageRequest } from "./http-support.js";
import type { OrganizationsService } from "./organizations.service.js";
import { mergeAnalytics, normalizeIdentityProviders, readAnalytics, readIdentityProviders } from "./world-settings.js";

/** Public addresses and platform defaults a world's representation is built with. */
export interface PublicUrls {
  /** PUBLIC_MAP_STORAGE_URL, without trailing slash. */
  mapStorageUrl: string;
  /** PLAY_URL, without trailing slash. */
  playUrl: string;
  /** MAX_STORAGE_BYTES_PER_WORLD: the storage quota of a world without its own. */
  maxStorageBytesPerWorld: number;
}

/** A stored world with its organization row (and, when read for its representation, its storage count). */
export type WorldWithOrganization = World & { organization: Organization; storageUsage?: WorldStorageUsage | null };

/** What a world's representation reads besides its row: its organization, and the bytes map-storage counted. */
const WITH_ORGANIZATION_AND_STORAGE = { organization: true, storageUsage: true } as const;

/** Worlds of an organization and their settings. */
export class WorldsService {
  private readonly storage: WorldStorageLedger;

  constructor(
    private readonly prisma: PrismaClient,
    /** The process's world directory: every lookup by slugs goes through it. */
    private readonly directory: WorldDirectory,
    private readonly organizations: OrganizationsService,
    private readonly urls: PublicUrls,
  ) {
    this.storage = new WorldStorageLedger(prisma);
  }

  /** Creates a world; 404 for an unknown organization, 409 for a taken slug or custom domain. */
  async create(organizationSlug: string, request: CreateWorldRequest): Promise<WorldResource> {
    const organization = await this.organizations.find(organizationSlug);
    const world = await this.writing(request, () =>
      this.prisma.world.create({
        data: {
          organizationId: organization.id,
          slug: request.slug,
          name: request.name,
          adminEmails: request.adminEmails,
          customDomain: request.customDomain ?? null,
          analytics: json(mergeAnalytics({ ...DEFAULT_WORLD_ANALYTICS }, request.analytics)),
          identityProviders: json(normalizeIdentityProviders(request.identityProviders ?? [])),
          ...quotaColumns(request.quotas),
        },
      }),
    );
    // Nothing can be stored for a world before it exists (map-storage takes only its API keys), so
    // its count starts at 0 and its bytes in use show from the start.
    await this.storage.initialize({ organization: organization.slug, world: world.slug }, 0);
    return this.toResource({ ...world, organization, storageUsage: { worldId: world.id, bytesUsed: 0n, countedAt: world.createdAt, updatedAt: world.createdAt } });
  }

  /** Worlds of an organization ordered by slug; 404 for an unknown organization. */
  async list(organizationSlug: string, page: PageRequest): Promise<ListResource<WorldResource>> {
    const organization = await this.organizations.find(organizationSlug);
    const { take, where } = slugPage(page);
    const rows = await this.prisma.world.findMany({ where: { organizationId: organization.id, ...where }, orderBy: { slug: "asc" }, take, include: { storageUsage: true } });
    return toPage(rows, page, slugCursor, (w) => this.toResource({ ...w, organization }));
  }

  /** One world; 404 when the organization or the world does not exist. */
  async get(organizationSlug: string, worldSlug: string): Promise<WorldResource> {
    return this.toResource(await this.find(organizationSlug, worldSlug));
  }

  /** The stored world with its organization; 404 when either does not exist. */
  async find(organizationSlug: string, worldSlug: string): Promise<WorldWithOrganization> {
    const id = await this.directory.idOf(organizationSlug, worldSlug);
    // Deleted since (with its organization): the same 404.
    const world = id === null ? null : await this.prisma.world.findUnique({ where: { id }, include: WITH_ORGANIZATION_AND_STORAGE });
    if (!world) throw notFound(`There is no world "${organizationSlug}/${worldSlug}".`);
    return world;
  }

  /**
   * Applies a settings patch. The row is locked for the read-merge-write, so two concurrent
   * patches of different analytics switches both take effect. Who may send which member is decided
   * before (`authorizeWorldPatch`): here every member given is applied.
   */
  async update(organizationSlug: string, worldSlug: string, patch: UpdateWorldRequest): Promise<WorldResource> {
    const world = await this.writing(patch, () =>
      this.prisma.$transaction(async (tx) => {
        const id = await this.directory.lock(organizationSlug, worldSlug, prismaRunner(tx));
        if (id === null) throw notFound(`There is no world "${organizationSlug}/${worldSlug}".`);
        const current = await tx.world.findUniqueOrThrow({ where: { id } });
        const data: Prisma.WorldUpdateInput = {};
        if (patch.name !== undefined) data.name = patch.name;
        if (patch.adminEmails !== undefined) data.adminEmails = patch.adminEmails;
        if (patch.customDomain !== undefined) data.customDomain = patch.customDomain;
        if (patch.analytics !== undefined) data.analytics = json(mergeAnalytics(readAnalytics(current.analytics), patch.analytics));
        if (patch.identityProviders !== undefined) data.identityProviders = json(normalizeIdentityProviders(patch.identityProviders));
        Object.assign(data, quotaColumns(patch.quotas));
        return tx.world.update({ where: { id }, data, include: WITH_ORGANIZATION_AND_STORAGE });
      }),
    );
    return this.toResource(world);
  }

  /** `{PUBLIC_MAP_STORAGE_URL}/<org>/<world>` */
  mapStorageUrl(organizationSlug: string, worldSlug: string): string {
    return `${this.urls.mapStorageUrl}/${organizationSlug}/${worldSlug}`;
  }

  private toResource(w: WorldWithOrganization): WorldResource {
    const org = w.organization.slug;
    return {
      id: w.id,
      organization: org,
      slug: w.slug,
      name: w.name,
      adminEmails: w.adminEmails,
      customDomain: w.customDomain,
      mapStorageUrl: this.mapStorageUrl(org, w.slug),
      playUrl: worldReference(this.urls.playUrl, org, w.slug, w.customDomain).url,
      roomUrlBase: w.customDomain ? `https://${w.customDomain}/@/` : `${this.urls.playUrl}/@/${org}/${w.slug}/`,
      analytics: readAnalytics(w.analytics),
      identityProviders: readIdentityProviders(w.identityProviders),
      quotas: {
        maxEndpoints: w.maxEndpoints,
        maxAuthEndpoints: w.maxAuthEndpoints,
        analyticsBufferMax: w.analyticsBufferMax,
        maxStorageBytes: w.maxStorageBytes === null ? null : Number(w.maxStorageBytes),
      },
      storage: {
        bytesInUse: w.storageUsage ? Number(w.storageUsage.bytesUsed) : null,
        maxBytes: w.maxStorageBytes === null ? this.urls.maxStorageBytesPerWorld : Number(w.maxStorageBytes),
      },
      createdAt: w.createdAt.toISOString(),
      updatedAt: w.updatedAt.toISOString(),
    };
  }

  /** Runs a write, turning unique violations into 409s that point at the member concerned. */
  private async writing<T>(request: { slug?: string; customDomain?: string | null }, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      const fields = uniqueViolationFields(err);
      if (!fields) throw err;
      if (fields.includes("custom_domain")) {
        throw new AppError(409, "custom-domain-taken", `The custom domain "${request.customDomain ?? ""}" is already used by another world.`, {
          errors: [{ pointer: "/customDomain", detail: "is already used by another world" }],
        });
      }
      throw new AppError(409, "world-exists", `The organization already has a world with the slug "${request.slug ?? ""}".`, {
        errors: [{ pointer: "/slug", detail: "is already taken in this organization" }],
      });
    }
  }
}

/** The quota columns a (partial) quotas object sets; members absent are left as they are, `null` restores the default. */
function quotaColumns(quotas: Partial<WorldQuotas> | undefined): Omit<Partial<WorldQuotas>, "maxStorageBytes"> & { maxStorageBytes?: bigint | null } {
  if (!quotas) return {};
  return {
    ...(quotas.maxEndpoints === undefined ? {} : { maxEndpoints: quotas.maxEndpoints }),
    ...(quotas.maxAuthEndpoints === undefined ? {} : { maxAuthEndpoints: quotas.maxAuthEndpoints }),
    ...(quotas.analyticsBufferMax === undefined ? {} : { analyticsBufferMax: quotas.analyticsBufferMax }),
    // A BIGINT column: quotas of several GiB pass 2^31.
    ...(quotas.maxStorageBytes === undefined ? {} : { maxStorageBytes: quotas.maxStorageBytes === null ? null : BigInt(quotas.maxStorageBytes) }),
  };
}

/** Settings objects go into JSON columns as they are. */
const json = (value: object) => value as Prisma.InputJsonValue;
