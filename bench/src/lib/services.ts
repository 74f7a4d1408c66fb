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
