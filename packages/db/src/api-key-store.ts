/**
 * The one owner of `api_keys`: admin-api issues and revokes keys through it, and the services that
 * accept world API keys (map-storage, admin-api's Inbound API, through service-kit's
 * `ApiKeyAuthenticator`) look them up and record their last use through it. Only the SHA-256 of a
 * token is stored (`generateApiKey`, `hashApiKey`).
 */
import { generateApiKey } from "./api-keys.js";
import type { ApiKey, PrismaClient } from "./generated/prisma/client.js";

/** The world a valid API key belongs to. */
export interface ApiKeyPrincipal {
  keyId: string;
  worldId: string;
  /** Slugs of the key's organization and world. */
  organization: string;
  world: string;
  customDomain: string | null;
}

/** See the file comment. */
export class ApiKeyStore {
  constructor(private readonly prisma: PrismaClient) {}

  /** Issues a key of the world: the stored row and the token, which nothing keeps (show it once). */
  async issue(worldId: string, name: string | null): Promise<{ key: ApiKey; token: string }> {
    const { token, tokenHash, tokenPrefix } = generateApiKey();
    const key = await this.prisma.apiKey.create({ data: { worldId, name, tokenHash, tokenPrefix } });
    return { key, token };
  }

  /** Revokes a key at once; a revoked key keeps its first `revokedAt`. */
  async revoke(keyId: string, at: Date = new Date()): Promise<void> {
    await this.prisma.apiKey.updateMany({ where: { id: keyId, revokedAt: null }, data: { revokedAt: at } });
  }

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

  /** Records `at` as the key's last use (shown in admin-api's key list); a key deleted meanwhile is no error. */
  async touch(keyId: string, at: Date): Promise<void> {
    await this.prisma.apiKey.updateMany({ where: { id: keyId }, data: { lastUsedAt: at } });
  }
}
