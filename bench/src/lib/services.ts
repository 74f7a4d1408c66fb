/**
 * Where the deployables are, for benchmarks that run them as processes (`spawnService` of
 * @vw/testing). A benchmark reaches a service only through its process and its HTTP API, never
 * through its modules: what it measures is the deployable as it runs.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (this file is bench/src/lib/services.ts). */
export const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** The deployables a benchmark can start. */
export type ServiceName = "map-storage" | "event-ingest" | "admin-api" | "delivery-worker";

/** The folder of a deployable, as `spawnService` takes it. */
export function serviceDir(name: ServiceName): string {
  return join(ROOT, "services", name);
}

/**
 * Applies the migrations to a database of the benchmark's own (a private PostgreSQL) the way an
 * operator does: `pnpm db:migrate` with its DATABASE_URL.
 */
export async function migrateDatabase(databaseUrl: string): Promise<void> {
  const { spawn } = await import("node:child_process");
  const output: Buffer[] = [];
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn("pnpm", ["db:migrate"], { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl }, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.on("data", (c: Buffer) => output.push(c));
    child.stderr.on("data", (c: Buffer) => output.push(c));
    child.on("close", resolve);
  });
  if (code !== 0) throw new Error(`pnpm db:migrate failed (exit ${code}):\n${Buffer.concat(output).toString("utf8").slice(-3000)}`);
}
