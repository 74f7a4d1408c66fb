import type { PrismaClient } from "./generated/prisma/client.js";

/** The world a valid API key belongs to. */
export interface ApiKeyPrincipal {
  keyId: string;
  worldId: string;
  /** Slugs of the key's organization and world. */
  organization: string;
  world: string;
  customDomain: string | null;
}

/**
 * Reads `api_keys` for the services that accept world API keys (map-storage, admin-api's Inbound
 * API), through service-kit's `ApiKeyAuthenticator`. Keys are issued and revoked only by
 * admin-api's api-keys service; this reads them, and records when a key was last used.
 */
export class PrismaApiKeyLookup {
  constructor(private readonly prisma: PrismaClient) {}

  /** The key whose token hashes to `tokenHash` (see `hashApiKey`), or null when unknown or revoked. */
  async findActiveKey(tokenHash: string): Promise<ApiKeyPrincipal | null> {
    const key = await this.prisma.apiKey.findUnique({
      where: { tokenHash },
      include: { world: { include: { organization: true } } },
    });
    if (!key || key.revokedAt) return null;
    return {
      keyId: key.id,
      worldId: key.worldId,
      organization: key.world.organization.slug,
      world: key.world.slug,
      customDomain: key.world.customDomain,
    };
  }

  /** Records `at` as the key's last use (shown in admin-api's key list). */
  async touch(keyId: string, at: Date): Promise<void> {
    await this.prisma.apiKey.update({ where: { id: keyId }, data: { lastUsedAt: at } });
  }
}
