import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client.js";
import { CatalogTolerantClient } from "./pg-compat.js";

/** Options of {@link createPrismaClient}. */
export interface PrismaClientOptions {
  /** Largest number of pooled connections (pg's default is 10). */
  max?: number;
}

/**
 * Builds the Prisma client of one process. It reaches PostgreSQL through `pg` and the
 * @prisma/adapter-pg driver adapter (no native query engine is used or downloaded).
 * `databaseUrl` is a `postgresql://` URL; pg reads `sslmode` and the other libpq parameters in it.
 * Create one per process in `main.ts` and `$disconnect()` it on shutdown.
 */
export function createPrismaClient(databaseUrl: string, opts: PrismaClientOptions = {}): PrismaClient {
  const adapter = new PrismaPg({
    connectionString: databaseUrl,
    // Lets raw queries read `name` columns of the catalogs (see pg-compat.ts).
    Client: CatalogTolerantClient,
    ...(opts.max !== undefined ? { max: opts.max } : {}),
  });
  return new PrismaClient({ adapter });
}

/** Resolves when the database answers a trivial query; for `/readyz`. */
export async function pingDatabase(prisma: PrismaClient): Promise<void> {
  await prisma.$queryRaw`SELECT 1`;
}
