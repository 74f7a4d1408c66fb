// Types of local-infra.mjs for the TypeScript tests and benchmarks that call it.
export declare const DEFAULT_PG_ADMIN_URL: string;
export declare const DEFAULT_REDIS_URL: string;
export declare const S3RVER_CREDENTIALS: Readonly<{ accessKeyId: string; secretAccessKey: string }>;
export declare function randomSuffix(bytes?: number): string;
export declare function startS3rver(options?: { directory?: string; bucket?: string; port?: number }): Promise<{
  endpoint: string;
  bucket: string;
  env: Record<string, string>;
  stop(): Promise<void>;
}>;
export declare function databaseUrlFor(adminUrl: string, name: string): string;
export declare function splitDatabaseUrl(databaseUrl: string): { name: string; adminUrl: string };
export declare function redact(connectionUrl: string): string;
export declare function ensureDatabase(adminUrl: string, name: string): Promise<{ databaseUrl: string; created: boolean }>;
export declare function createDatabaseFromTemplate(adminUrl: string, name: string, template: string): Promise<{ databaseUrl: string }>;
export declare function dropDatabasesStartingWith(adminUrl: string, prefix: string): Promise<void>;
export declare function dropDatabase(adminUrl: string, name: string): Promise<void>;
/** Applies the Prisma migrations of packages/db to `databaseUrl` (prisma migrate deploy). */
export declare function migrate(databaseUrl: string): Promise<string>;
export declare function assertReachable(serviceUrl: string, label: string, defaultPort: number): Promise<void>;
