import type { PrismaClient } from "@vw/db";
import type { ApiKeyLookup, KeyPrincipal } from "./api-key-auth.js";

/** {@link ApiKeyLookup} over the `api_keys` table. */
export class PrismaKeyLookup implements ApiKeyLookup {
  constructor(private readonly prisma: PrismaClient) {}

  async findActiveKey(tokenHash: string): Promise<KeyPrincipal | null> {
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

  async touch(keyId: string, at: Date): Promise<void> {
    await this.prisma.apiKey.update({ where: { id: keyId }, data: { lastUsedAt: at } });
  }
}
