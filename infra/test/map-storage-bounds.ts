/**
 * map-storage's resources against the bounds its configuration sets, read from a rendered overlay
 * with the service's own config reader: the uploads volume must hold MAX_CONCURRENT_UPLOADS zips
 * of MAX_UPLOAD_BYTES at once (each spooled there whole), and the memory limit must cover what the
 * service can hold at once (see {@link memoryBudget} and infra/README.md "Sizing map-storage").
 */
import type { MapStorageConfig } from "../../services/map-storage/src/config.js";
import { ref, resolveEnv, type K8sObject } from "./k8s-rules.js";

const MiB = 1024 ** 2;

/**
 * What map-storage may hold in memory at once, with its defaults in brackets:
 * - the runtime: V8, the code, the S3, Redis and PostgreSQL clients and their sockets (192 MiB: an
 *   idle service measured at 185 MiB under tsx, less compiled);
 * - FILE_CACHE_BYTES (128 MiB);
 * - each upload in progress (MAX_CONCURRENT_UPLOADS, 2): a `.wam` being validated
 *   (MAX_JSON_FILE_BYTES, 8 MiB) and 16 files of up to 1 MiB being written (16 MiB);
 * - one body of MAX_FILE_BYTES being read, twice (the chunks, then the whole) (100 MiB);
 * - the worst single request its tests bound: a patch doubling a document, or slow readers of
 *   large files (150 MiB).
 */
export function memoryBudget(c: Pick<MapStorageConfig, "fileCacheBytes" | "maxConcurrentUploads" | "maxJsonFileBytes" | "maxFileBytes">): number {
  return 192 * MiB + c.fileCacheBytes + c.maxConcurrentUploads * (c.maxJsonFileBytes + 16 * MiB) + 2 * c.maxFileBytes + 150 * MiB;
}

const UNITS: Record<string, number> = { "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4 };

/** Bytes of a Kubernetes quantity (`768Mi`, `2Gi`, `1G`); NaN when it is not one. */
export function quantityBytes(q: string | number | undefined): number {
  const m = /^(\d+(?:\.\d+)?)(|k|M|G|T|Ki|Mi|Gi|Ti)$/.exec(String(q ?? ""));
  return m ? Number(m[1]) * UNITS[m[2]!]! : NaN;
}

/** The violations of map-storage's Deployment in `objects`, its env read by `loadConfig`. */
export function checkMapStorageBounds(objects: K8sObject[], loadConfig: (env: Record<string, string>) => MapStorageConfig): string[] {
  const d = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "map-storage");
  if (!d) return ["Deployment/map-storage: missing"];
  const pod = d.spec.template.spec;
  const app = pod.containers.find((c: { name: string }) => c.name === "app");
  const x = { configMaps: objects.filter((o) => o.kind === "ConfigMap"), secrets: objects.filter((o) => o.kind === "Secret"), ctx: { overlay: "", readers: {}, workerDrainMs: 0, externalSecretSamples: {} } };
  // Credentials of an overlay that does not render its Secret play no part in the bounds.
  const env: Record<string, string> = { DATABASE_URL: "postgresql://bounds@db/vw", S3_BUCKET: "bounds" };
  for (const e of app.env ?? []) {
    const { value } = resolveEnv(e, x);
    if (value !== undefined) env[e.name] = value;
  }
  const config = loadConfig(env);
  const v: string[] = [];
  const where = ref(d);

  const mount = (app.volumeMounts ?? []).find((m: { mountPath: string }) => m.mountPath === config.uploadTmpDir);
  const volume = mount && (pod.volumes ?? []).find((vol: { name: string }) => vol.name === mount.name);
  const spool = config.maxZipBytes * config.maxConcurrentUploads;
  if (!volume) v.push(`${where}: uploads volume: UPLOAD_TMP_DIR (${config.uploadTmpDir}) is not on a volume (the root filesystem is read-only)`);
  else if (volume.emptyDir && !(quantityBytes(volume.emptyDir.sizeLimit) >= spool)) {
    v.push(`${where}: uploads volume: ${volume.name} holds ${volume.emptyDir.sizeLimit ?? "no sizeLimit"}, less than MAX_CONCURRENT_UPLOADS x the largest zip (${config.maxConcurrentUploads} x ${config.maxZipBytes} bytes)`);
  }

  const limit = quantityBytes(app.resources?.limits?.memory);
  const budget = memoryBudget(config);
  if (!(limit >= budget)) v.push(`${where}: memory limit: ${app.resources?.limits?.memory ?? "none"} is less than map-storage's bounds (${Math.ceil(budget / MiB)} MiB)`);
  return v;
}
