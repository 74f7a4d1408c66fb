/**
 * The rules every rendered Kubernetes object of infra/k8s must follow, checked object by object.
 * Each violation names the object (`Kind/name`) and the rule, so a broken manifest says what to
 * fix. Schemas come from `kubernetes-models` (the API's OpenAPI schemas) and, for the Prometheus
 * Operator's kinds, `@kubernetes-models/prometheus-operator`: fully offline.
 */
import { spawnSync } from "node:child_process";
import { parseAllDocuments } from "yaml";

/** A rendered object, as YAML gives it. */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> } } & Record<string, any>;

/** What one service's config reader knows: every variable it reads, and those it requires. */
export interface ConfigReader {
  known: Set<string>;
  required: Set<string>;
  /** Runs the service's `loadConfig` on an environment; returns its problems (empty when valid). */
  problems(env: Record<string, string>): string[];
}

/** What the checker needs to know beyond the objects. */
export interface RuleContext {
  overlay: string;
  /** The config readers of the four services, by service (= Deployment) name. */
  readers: Record<string, ConfigReader>;
  /** The worker's shutdown deadline (ms), read from its main.ts. */
  workerDrainMs: number;
  /** Values standing in for the keys of a Secret the overlay does not render (production). */
  externalSecretSamples: Record<string, string>;
}

export const SERVICES = ["map-storage", "admin-api", "event-ingest", "delivery-worker"] as const;
const HTTP_SERVICES = ["map-storage", "admin-api", "event-ingest"];
const AUTOSCALED = ["event-ingest", "delivery-worker"];
/**
 * The services that put delivery jobs in Redis: each needs QUEUE_SHARDS (which shard an endpoint's
 * jobs go to), and all of them the same value, so it comes from the one ConfigMap vw-settings.
 */
export const QUEUE_SHARD_SERVICES: readonly string[] = ["admin-api", "event-ingest", "delivery-worker"];
const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "Job"]);
const PRIVATE_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10"];
/** Names of variables that hold credentials: their values belong in a Secret. */
const SECRET_NAME = /(TOKEN|SECRET|PASSWORD|ENCRYPTION|PSEUDONYM|ACCESS_KEY|DATABASE_URL|REDIS_URL|SMTP_URL)/;
/** A value carrying credentials (`scheme://user:password@host`). */
const CREDENTIALS_IN_URL = /:\/\/[^/\s:@]+:[^/\s@]+@/;

/** Renders an overlay with the kustomize built into kubectl. */
export function renderKustomization(dir: string): K8sObject[] {
  const out = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8", maxBuffer: 32 * 1024 * 1024 });
  if (out.error) throw new Error(`kubectl kustomize ${dir}: ${out.error.message} (kubectl 1.27+ is needed to render the manifests; see infra/README.md)`);
  if (out.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${out.stderr}`);
  return parseAllDocuments(out.stdout).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`kubectl kustomize ${dir}: ${doc.errors[0]!.message}`);
    return doc.toJS() as K8sObject;
  }).filter(Boolean);
}

/** `Kind/name`, the way a violation names an object. */
export const ref = (o: K8sObject): string => `${o.kind}/${o.metadata?.name}`;

/** Validates an object against its kind's API schema; returns the error, or null. */
export async function schemaError(o: K8sObject): Promise<string | null> {
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
  const modulePath = group === "monitoring.coreos.com"
    ? `@kubernetes-models/prometheus-operator/${group}/${version}/${o.kind}`
    : `kubernetes-models/${group ? `${group}/` : ""}${version}/${o.kind}`;
  let Model: new (data: unknown) => { validate(): void };
  try {
    const mod = (await import(modulePath)) as Record<string, new (data: unknown) => { validate(): void }>;
    Model = mod[o.kind]!;
    if (!Model) throw new Error("no model");
  } catch {
    return `no schema known for ${o.apiVersion} ${o.kind}`;
  }
  // The API server decodes a Secret's base64 ignoring line breaks; kubectl kustomize wraps long values at 76 characters.
  const data = o.kind === "Secret" && o.data ? Object.fromEntries(Object.entries(o.data as Record<string, string>).map(([k, v]) => [k, v.replace(/\s+/g, "")])) : undefined;
  try {
    new Model(data === undefined ? o : { ...o, data }).validate();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Every rule, over every object of one rendered overlay; returns the violations. */
export async function checkManifests(objects: K8sObject[], ctx: RuleContext): Promise<string[]> {
  const v: string[] = [];
  const fail = (o: K8sObject, rule: string, detail: string): void => void v.push(`${ref(o)}: ${rule}: ${detail}`);
  const byKind = (kind: string): K8sObject[] => objects.filter((o) => o.kind === kind);
  const find = (kind: string, name: string): K8sObject | undefined => byKind(kind).find((o) => o.metadata.name === name);
  const configMaps = byKind("ConfigMap");
  const secrets = byKind("Secret");

  for (const o of objects) {
    const err = await schemaError(o);
    if (err !== null) fail(o, "schema", err);
    for (const key of Object.keys(o.metadata?.annotations ?? {})) {
      if (/^(helm\.sh\/hook|argocd\.argoproj\.io\/hook)/.test(key)) fail(o, "no install hooks", `annotation ${key} (migrations run in init containers)`);
    }
  }

  for (const cm of configMaps) {
    for (const [key, value] of Object.entries<string>(cm.data ?? {})) {
      if (SECRET_NAME.test(key)) fail(cm, "no secret in a ConfigMap", `key ${key} belongs in a Secret`);
      if (CREDENTIALS_IN_URL.test(String(value))) fail(cm, "no secret in a ConfigMap", `key ${key} holds a URL with credentials`);
    }
  }

  for (const o of objects.filter((x) => WORKLOAD_KINDS.has(x.kind))) checkPod(o, fail);

  // Until a config reader reads QUEUE_SHARDS (the sharded deliveries queue lands separately), the
  // manifests may already give it to the services that will; once one reads it, every rule applies.
  const queueShardsRead = SERVICES.some((name) => ctx.readers[name]?.known.has("QUEUE_SHARDS") === true);
  for (const name of SERVICES) {
    const d = find("Deployment", name);
    if (!d) {
      v.push(`Deployment/${name}: one Deployment per service: missing`);
      continue;
    }
    checkServiceDeployment(d, name, { objects, configMaps, secrets, ctx, fail, queueShardsRead });
  }

  const webhooks = byKind("NetworkPolicy").filter((np) => np.spec?.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "delivery-worker");
  if (webhooks.length === 0) v.push("NetworkPolicy/*: worker egress: no NetworkPolicy selects the delivery worker");
  checkWorkerEgress(webhooks, fail);
  return v;
}

type Fail = (o: K8sObject, rule: string, detail: string) => void;

/** Probes, resources, security context, pinned images: every container of every workload. */
function checkPod(o: K8sObject, fail: Fail): void {
  const pod = o.spec?.template?.spec ?? {};
  const podSec = pod.securityContext ?? {};
  if (pod.automountServiceAccountToken !== false) fail(o, "security context", "automountServiceAccountToken must be false");
  const containers: any[] = pod.containers ?? [];
  const all = [...(pod.initContainers ?? []), ...containers];
  for (const c of all) {
    const where = `container ${c.name}`;
    const sec = c.securityContext ?? {};
    if (!(sec.runAsNonRoot ?? podSec.runAsNonRoot)) fail(o, "security context", `${where}: runAsNonRoot must be true`);
    if (sec.allowPrivilegeEscalation !== false) fail(o, "security context", `${where}: allowPrivilegeEscalation must be false`);
    if (sec.readOnlyRootFilesystem !== true) fail(o, "security context", `${where}: readOnlyRootFilesystem must be true`);
    if (!(sec.capabilities?.drop ?? []).includes("ALL")) fail(o, "security context", `${where}: capabilities must drop ALL`);
    if ((sec.capabilities?.add ?? []).length > 0) fail(o, "security context", `${where}: adds capabilities`);
    if ((sec.seccompProfile?.type ?? podSec.seccompProfile?.type) !== "RuntimeDefault") fail(o, "security context", `${where}: seccompProfile must be RuntimeDefault`);
    for (const kind of ["requests", "limits"]) {
      for (const res of ["cpu", "memory"]) {
        if (c.resources?.[kind]?.[res] === undefined) fail(o, "resources", `${where}: no ${kind}.${res}`);
      }
    }
    const image = String(c.image ?? "");
    const tag = /@sha256:[0-9a-f]{64}$/.test(image) ? "digest" : /:([^/:]+)$/.exec(image)?.[1];
    if (tag === undefined || tag === "latest") fail(o, "images pinned", `${where}: image ${image || "(none)"} has no tag or digest other than latest`);
  }
  if (o.kind !== "Job") {
    for (const c of containers) {
      if (!c.livenessProbe) fail(o, "probes", `container ${c.name}: no livenessProbe`);
      if (!c.readinessProbe) fail(o, "probes", `container ${c.name}: no readinessProbe`);
    }
  }
}

/** The rules of the four services' Deployments: probes paths, env, spread, PDB, HPA, grace, migrations. */
function checkServiceDeployment(
  d: K8sObject,
  name: string,
  x: { objects: K8sObject[]; configMaps: K8sObject[]; secrets: K8sObject[]; ctx: RuleContext; fail: Fail; queueShardsRead: boolean },
): void {
  const { objects, configMaps, secrets, ctx, fail } = x;
  const pod = d.spec?.template?.spec ?? {};
  const labels: Record<string, string> = d.spec?.template?.metadata?.labels ?? {};
  const selects = (sel: Record<string, string> | undefined): boolean =>
    sel !== undefined && Object.keys(sel).length > 0 && Object.entries(sel).every(([k, val]) => labels[k] === val);
  const app = (pod.containers ?? []).find((c: { name: string }) => c.name === "app");
  if (!app) {
    fail(d, "containers", "no container named app");
    return;
  }
  if (app.livenessProbe?.httpGet?.path !== "/healthz") fail(d, "probes", "liveness must be GET /healthz");
  if (app.readinessProbe?.httpGet?.path !== "/readyz") fail(d, "probes", "readiness must be GET /readyz");
  if (!(pod.topologySpreadConstraints ?? []).some((t: { topologyKey: string }) => t.topologyKey === "kubernetes.io/hostname")) {
    fail(d, "spread across nodes", "no topologySpreadConstraint on kubernetes.io/hostname");
  }
  if (!objects.some((o) => o.kind === "PodDisruptionBudget" && selects(o.spec?.selector?.matchLabels))) fail(d, "PodDisruptionBudget", "none selects its pods");
  const service = objects.find((o) => o.kind === "Service" && selects(o.spec?.selector));
  if (!service) fail(d, "Service", "no Service selects its pods");
  if (AUTOSCALED.includes(name) && !objects.some((o) => o.kind === "HorizontalPodAutoscaler" && o.spec?.scaleTargetRef?.name === name)) {
    fail(d, "HorizontalPodAutoscaler", "none scales it");
  }
  if (name === "delivery-worker" && !((pod.terminationGracePeriodSeconds ?? 30) * 1000 > ctx.workerDrainMs)) {
    fail(d, "termination grace", `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds ?? 30} s is not longer than the worker's ${ctx.workerDrainMs} ms drain`);
  }
  if (!(pod.initContainers ?? []).some((c: { image?: string }) => /\/migrate[:@]/.test(c.image ?? ""))) {
    fail(d, "migrations", "no init container runs the migrate image");
  }
  if (HTTP_SERVICES.includes(name) && !(service?.spec?.ports ?? []).some((p: { targetPort?: unknown }) => p.targetPort === "http")) {
    fail(d, "Service", "its Service does not target the port named http");
  }

  checkQueueShards(d, name, app.env ?? [], fail);

  const reader = ctx.readers[name];
  if (!reader) return;
  const env: Record<string, string> = {};
  const given = new Set<string>();
  for (const e of app.env ?? []) {
    given.add(e.name);
    const awaitedReader = e.name === "QUEUE_SHARDS" && !x.queueShardsRead && QUEUE_SHARD_SERVICES.includes(name);
    if (!reader.known.has(e.name) && !awaitedReader) fail(d, "env known to the config reader", `${e.name} is not read by ${name}'s config.ts`);
    const value = resolveEnv(e, { configMaps, secrets, ctx });
    if (value.error) fail(d, "env resolves", `${e.name}: ${value.error}`);
    else if (value.value !== undefined) env[e.name] = value.value;
  }
  if ((app.envFrom ?? []).length > 0) fail(d, "env known to the config reader", "envFrom hands over variables the reader may not know: list them in env");
  for (const req of reader.required) if (!given.has(req)) fail(d, "required env given", `${req} is required by ${name}'s config.ts`);
  for (const problem of reader.problems(env)) fail(d, "config reader accepts the env", problem);
}

/**
 * QUEUE_SHARDS: given to every service that queues deliveries, from the ConfigMap vw-settings (one
 * value for all of them: a producer and a worker that disagree put and look for an endpoint's jobs
 * in different shards), never as a literal or an optional key; and to no other service.
 */
function checkQueueShards(d: K8sObject, name: string, env: { name: string; value?: string; valueFrom?: { configMapKeyRef?: { name: string; optional?: boolean } } }[], fail: Fail): void {
  const entry = env.find((e) => e.name === "QUEUE_SHARDS");
  if (!QUEUE_SHARD_SERVICES.includes(name)) {
    if (entry) fail(d, "queue shards", `QUEUE_SHARDS is given to ${name}, which queues no deliveries`);
    return;
  }
  const ref = entry?.valueFrom?.configMapKeyRef;
  if (!entry) fail(d, "queue shards", "QUEUE_SHARDS is not given (every service that queues deliveries needs it, from vw-settings)");
  // Rendered, the generated ConfigMap's name carries its content's hash (vw-settings-<hash>).
  else if (!/^vw-settings(-[a-z0-9]+)?$/.test(ref?.name ?? "") || ref?.optional === true) fail(d, "queue shards", "QUEUE_SHARDS must come from the ConfigMap vw-settings, not optional, so that every service has the same value");
}

/** The value an env entry resolves to, from the rendered ConfigMaps and Secrets. */
export function resolveEnv(
  e: { value?: string; valueFrom?: { configMapKeyRef?: { name: string; key: string; optional?: boolean }; secretKeyRef?: { name: string; key: string; optional?: boolean } } },
  x: { configMaps: K8sObject[]; secrets: K8sObject[]; ctx: RuleContext },
): { value?: string; error?: string } {
  if (e.value !== undefined) return { value: e.value };
  const cmRef = e.valueFrom?.configMapKeyRef;
  if (cmRef) {
    const cm = x.configMaps.find((c) => c.metadata.name === cmRef.name);
    if (!cm) return { error: `ConfigMap ${cmRef.name} is not rendered` };
    const value = cm.data?.[cmRef.key] as string | undefined;
    if (value === undefined && !cmRef.optional) return { error: `ConfigMap ${cmRef.name} has no key ${cmRef.key}` };
    return { value };
  }
  const secRef = e.valueFrom?.secretKeyRef;
  if (secRef) {
    const secret = x.secrets.find((s) => s.metadata.name === secRef.name);
    if (!secret) {
      // Production: an existing Secret, not rendered; a documented key gets a sample value.
      const sample = x.ctx.externalSecretSamples[secRef.key];
      if (sample === undefined && !secRef.optional) return { error: `Secret ${secRef.name} is not rendered and ${secRef.key} is not a documented key` };
      return { value: secRef.optional ? undefined : sample };
    }
    const data = secret.data?.[secRef.key] as string | undefined;
    const plain = secret.stringData?.[secRef.key] as string | undefined;
    if (data === undefined && plain === undefined) return secRef.optional ? {} : { error: `Secret ${secRef.name} has no key ${secRef.key}` };
    return { value: plain ?? Buffer.from(data!, "base64").toString("utf8") };
  }
  return { error: "neither value nor a ConfigMap or Secret key" };
}

/** Webhook egress: 443 to public addresses only; no rule opens 443 (or every port) to a private range or to pods. */
function checkWorkerEgress(policies: K8sObject[], fail: Fail): void {
  let opens443 = false;
  for (const np of policies) {
    if (!(np.spec?.policyTypes ?? []).includes("Egress")) fail(np, "worker egress", "policyTypes must include Egress");
    for (const rule of np.spec?.egress ?? []) {
      const ports: { port?: number }[] | undefined = rule.ports;
      const covers443 = ports === undefined || ports.length === 0 || ports.some((p) => p.port === 443 || p.port === undefined);
      if (!covers443) continue;
      const peers: any[] = rule.to ?? [];
      if (peers.length === 0) fail(np, "worker egress", "a rule opens 443 to every destination, private ranges included");
      for (const peer of peers) {
        if (peer.podSelector || peer.namespaceSelector) fail(np, "worker egress", "a rule opens 443 to pods of the cluster");
        const block = peer.ipBlock;
        if (!block) continue;
        if (block.cidr === "0.0.0.0/0") {
          opens443 = true;
          const missing = PRIVATE_V4.filter((r) => !(block.except ?? []).includes(r));
          if (missing.length > 0) fail(np, "worker egress", `0.0.0.0/0 on 443 does not except ${missing.join(", ")}`);
        } else if (block.cidr === "::/0") {
          const missing = ["fc00::/7", "fe80::/10", "::1/128"].filter((r) => !(block.except ?? []).includes(r));
          if (missing.length > 0) fail(np, "worker egress", `::/0 on 443 does not except ${missing.join(", ")}`);
        } else if (PRIVATE_V4.some((r) => inRange(block.cidr, r))) {
          fail(np, "worker egress", `443 is open to the private range ${block.cidr}`);
        }
      }
    }
  }
  if (policies.length > 0 && !opens443) fail(policies[0]!, "worker egress", "no rule lets the worker reach the internet on 443");
}

/** Whether IPv4 CIDR `inner` lies within `outer`. */
function inRange(inner: string, outer: string): boolean {
  const parse = (cidr: string): [number, number] | null => {
    const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr);
    if (!m) return null;
    return [((+m[1]! << 24) | (+m[2]! << 16) | (+m[3]! << 8) | +m[4]!) >>> 0, +m[5]!];
  };
  const a = parse(inner);
  const b = parse(outer);
  if (!a || !b || a[1] < b[1]) return false;
  const mask = b[1] === 0 ? 0 : (~0 << (32 - b[1])) >>> 0;
  return (a[0] & mask) >>> 0 === (b[0] & mask) >>> 0;
}
