/**
 * map-storage's uploads volume and memory limit, in every overlay, against the bounds its
 * configuration sets (map-storage-bounds.ts); a manifest broken on purpose is reported.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "@jest/globals";
import { loadConfig } from "../../services/map-storage/src/config.js";
import { renderKustomization, type K8sObject } from "./k8s-rules.js";
import { checkMapStorageBounds, memoryBudget, quantityBytes } from "./map-storage-bounds.js";

const K8S = join(dirname(fileURLToPath(import.meta.url)), "..", "k8s");
const rendered: Record<string, K8sObject[]> = {};
beforeAll(() => {
  for (const overlay of ["dev", "production"]) rendered[overlay] = renderKustomization(join(K8S, "overlays", overlay));
});

const app = (objects: K8sObject[]) => objects.find((o) => o.kind === "Deployment" && o.metadata.name === "map-storage")!.spec.template.spec.containers[0];

describe.each(["dev", "production"])("overlay %s", (overlay) => {
  it("gives map-storage an uploads volume for MAX_CONCURRENT_UPLOADS zips and a memory limit over its bounds", () => {
    expect(checkMapStorageBounds(rendered[overlay]!, loadConfig)).toEqual([]);
  });
});

describe("the check", () => {
  const broken = (mutate: (objects: K8sObject[]) => void) => {
    const objects = structuredClone(rendered.production!);
    mutate(objects);
    return checkMapStorageBounds(objects, loadConfig);
  };

  it("reports more uploads at once than the volume holds", () => {
    expect(broken((o) => app(o).env.push({ name: "MAX_CONCURRENT_UPLOADS", value: "8" }))).toEqual([expect.stringContaining("uploads volume: uploads holds 2Gi, less than MAX_CONCURRENT_UPLOADS")]);
  });

  it("reports a memory limit under the bounds, and under a larger file cache", () => {
    expect(broken((o) => (app(o).resources.limits.memory = "512Mi"))).toEqual([expect.stringContaining("memory limit: 512Mi is less than map-storage's bounds")]);
    expect(broken((o) => app(o).env.push({ name: "FILE_CACHE_BYTES", value: String(512 * 1024 ** 2) }))).toEqual([expect.stringContaining("memory limit: 768Mi")]);
  });

  it("reports an upload directory that is not on a volume", () => {
    expect(broken((o) => (app(o).volumeMounts = []))).toEqual([expect.stringContaining("UPLOAD_TMP_DIR (/var/uploads) is not on a volume")]);
  });

  it("reads quantities and adds the bounds up as documented", () => {
    expect([quantityBytes("768Mi"), quantityBytes("2Gi"), quantityBytes("1G"), quantityBytes("lots")]).toEqual([768 * 1024 ** 2, 2 * 1024 ** 3, 1e9, NaN]);
    const defaults = loadConfig({ DATABASE_URL: "postgresql://x@h/db", S3_BUCKET: "b" });
    expect(memoryBudget(defaults) / 1024 ** 2).toBe(192 + 128 + 2 * (8 + 16) + 100 + 150);
  });
});
