import type { PrismaClient } from "./generated/prisma/client.js";

/** What a service that serves a world's files needs to know of it. */
export interface WorldSummary {
  worldId: string;
  /** The world's custom domain (room URLs are then `https://<domain>/@/<path>`), or null. */
  customDomain: string | null;
}

/**
 * Reads `worlds` by slugs for map-storage (is there such a world, what is its room URL base).
 * Worlds are created and changed only by admin-api's worlds service; this only reads them.
 */
export class PrismaWorldLookup {
  constructor(private readonly prisma: PrismaClient) {}

  /** The world `organization/world`, or null when there is none. */
  async findWorld(organization: string, world: string): Promise<WorldSummary | null> {
    const found = await this.prisma.world.findFirst({
      where: { slug: world, organization: { slug: organization } },
      select: { id: true, customDomain: true },
    });
    return found ? { worldId: found.id, customDomain: found.customDomain } : null;
  }
}
