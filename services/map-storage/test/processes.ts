/** map-storage as its own process, for the multi-instance tests (see @vw/testing). */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnService, type ServiceProcess } from "@vw/testing";

export type { ServiceProcess } from "@vw/testing";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Runs `services/map-storage/src/main.ts` (tsx, workspace sources) and waits for its /readyz. */
export function spawnMapStorage(env: Record<string, string>): Promise<ServiceProcess> {
  return spawnService(serviceDir, env);
}
