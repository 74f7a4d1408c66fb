import type { ApiKey, ApiKeyStore, PrismaClient } from "@vw/db";
import { notFound } from "@vw/service-kit";
import type { ApiKeyResource, CreateApiKeyRequest, CreatedApiKeyResource, ListResource } from "@vw/contracts";
import { isUuid, newestPage, newestCursor, toPage, type PageRequest } from "./http-support.js";
import type { WorldsService } from "./worlds.service.js";

/** Map-storage API keys of a world: issue (token shown once, hash stored), list, revoke; written through the ApiKeyStore of @vw/db. */
export class ApiKeysService {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly store: ApiKeyStore,
    private readonly worlds: WorldsService,
  ) {}

  /** Issues a key; the answer is the only place the token ever appears. */
  async create(organizationSlug: string, worldSlug: string, request: CreateApiKeyRequest): Promise<CreatedApiKeyResource> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    const { key, token } = await this.store.issue(world.id, request.name ?? null);
    return {
      id: key.id,
      name: key.name,
      token,
      tokenPrefix: key.tokenPrefix,
      mapStorageUrl: this.worlds.mapStorageUrl(organizationSlug, worldSlug),
      createdAt: key.createdAt.toISOString(),
    };
  }

  /** Keys of a world, newest first, revoked ones included. */
  async list(organizationSlug: string, worldSlug: string, page: PageRequest): Promise<ListResource<ApiKeyResource>> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    const { take, where } = newestPage(page);
    const rows = await this.prisma.apiKey.findMany({ where: { worldId: world.id, ...where }, orderBy: [{ createdAt: "desc" }, { id: "desc" }], take });
    return toPage(rows, page, newestCursor, toApiKeyResource);
  }

  /** One key of the world; 404 for an unknown id or a key of another world. */
  async get(organizationSlug: string, worldSlug: string, id: string): Promise<ApiKeyResource> {
    return toApiKeyResource(await this.find(organizationSlug, worldSlug, id));
  }

  /**
   * Revokes a key at once (map-storage refuses it from then on). Revoking a revoked key succeeds
   * and keeps the first `revokedAt`.
   */
  async revoke(organizationSlug: string, worldSlug: string, id: string): Promise<void> {
    const key = await this.find(organizationSlug, worldSlug, id);
    await this.store.revoke(key.id);
  }

  private async find(organizationSlug: string, worldSlug: string, id: string): Promise<ApiKey> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    const key = isUuid(id) ? await this.prisma.apiKey.findFirst({ where: { id, worldId: world.id } }) : null;
    if (!key) throw notFound(`World "${organizationSlug}/${worldSlug}" has no API key "${id}".`);
    return key;
  }
}

/** A key as listed: never the token, never its hash. */
export function toApiKeyResource(k: ApiKey): ApiKeyResource {
  return {
    id: k.id,
    name: k.name,
    tokenPrefix: k.tokenPrefix,
    createdAt: k.createdAt.toISOString(),
    revokedAt: k.revokedAt?.toISOString() ?? null,
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
  };
}
