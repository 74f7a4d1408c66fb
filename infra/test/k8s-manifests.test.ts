/**
 * infra/k8s, offline: every overlay rendered with `kubectl kustomize`, every object validated
 * against the Kubernetes API schemas (kubernetes-models) and checked against the rules of
 * k8s-rules.ts. The env rules use the services' own config readers: the variables a reader knows
 * and requires are observed by running it, not copied by hand.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "@jest/globals";
import { loadConfig as adminApiConfig } from "../../services/admin-api/src/config.js";
import { loadConfig as workerConfig } from "../../services/delivery-worker/src/config.js";
import { loadConfig as ingestConfig } from "../../services/event-ingest/src/config.js";
import { loadConfig as mapStorageConfig } from "../../services/map-storage/src/config.js";
import { SERVICES, checkManifests, ref, renderKustomization, type ConfigReader, type K8sObject, type RuleContext } from "./k8s-rules.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const K8S = join(ROOT, "infra", "k8s");

/** Observes a service's `loadConfig`: the names it reads (a Proxy over the env) and those it requires. */
function configReader(loadConfig: (env: Record<string, string | undefined>) => unknown): ConfigReader {
  const run = (env: Record<string, string>): { read: Set<string>; problems: string[] } => {
    const read = new Set<string>();
    const proxy = new Proxy(env, {
      get(target, key) {
        if (typeof key === "string") read.add(key);
        return typeof key === "string" ? target[key] : undefined;
      },
    });
    try {
      loadConfig(proxy);
      return { read, problems: [] };
    } catch (err) {
      const problems = (err as { problems?: string[] }).problems;
      if (!problems) throw err;
      return { read, problems };
    }
  };
  const empty = run({});
  const required = new Set(empty.problems.map((p) => /^([A-Z0-9_]+) is required/.exec(p)?.[1]).filter((n): n is string => n !== undefined));
  return {
    known: empty.read,
    required,
    problems: (env) => {
      const result = run(env);
      // A variable read only when another is set (none today) is known as well.
      for (const name of result.read) empty.read.add(name);
      return result.problems;
    },
  };
}

/** The worker's shutdown deadline, as its main.ts registers it. */
function workerDrainMs(): number {
  const main = readFileSync(join(ROOT, "services", "delivery-worker", "src", "main.ts"), "utf8");
  const m = /registerShutdown\([\s\S]*?\],\s*([\d_]+),?\s*\)/.exec(main);
  if (!m) throw new Error("registerShutdown(..., deadlineMs) not found in services/delivery-worker/src/main.ts");
  return Number(m[1]!.replace(/_/g, ""));
}

/** Sample values of the keys of vw-secrets (infra/README.md "Secrets"), for the production overlay. */
const SECRET_SAMPLES: Record<string, string> = {
  DATABASE_URL: "postgresql://vw:pw@db.internal:5432/vw",
  REDIS_URL: "rediss://:pw@redis.internal:6380/0",
  ADMIN_TOKEN: "sample-admin-token-6e2c9a4f1d7b3085",
  INGEST_TOKEN: "sample-ingest-token-9a4d2f7c1e6b3058",
  SECRETS_ENCRYPTION_KEY: Buffer.from("0c5f9a2e7b4d1836a9e2c7f05b8d3a61e4c9f2a7d0b5e8c3f6a1d4b7e0c3f9a2", "hex").toString("base64"),
  S3_ACCESS_KEY_ID: "AKIASAMPLE",
  S3_SECRET_ACCESS_KEY: "sample-secret",
  SMTP_URL: "smtps://user:pw@smtp.example.com:465",
  ANALYTICS_PSEUDONYM_KEY: "a".repeat(32),
  REDIS_PASSWORD: "sample-redis-password",
  REDIS_SENTINEL_PASSWORD: "sample-sentinel-password",
};

const context = (overlay: string): RuleContext => ({
  overlay,
  readers: {
    "map-storage": configReader(mapStorageConfig),
    "admin-api": configReader(adminApiConfig),
    "event-ingest": configReader(ingestConfig),
    "delivery-worker": configReader(workerConfig),
  },
  workerDrainMs: workerDrainMs(),
  externalSecretSamples: SECRET_SAMPLES,
});

/** The production overlay with a Redis topology component enabled (infra/test/overlays: an operator's copy). */
const TOPOLOGY_OVERLAYS = { "production-sentinel": "redis-sentinel", "production-cluster": "redis-cluster" } as const;

const rendered: Record<string, K8sObject[]> = {};
beforeAll(() => {
  for (const overlay of ["dev", "production"]) rendered[overlay] = renderKustomization(join(K8S, "overlays", overlay));
  for (const overlay of Object.keys(TOPOLOGY_OVERLAYS)) rendered[overlay] = renderKustomization(join(ROOT, "infra", "test", "overlays", overlay));
});

describe.each(["dev", "production"])("overlay %s", (overlay) => {
  it("renders, and every object passes the schema and the rules", async () => {
    expect(await checkManifests(rendered[overlay]!, context(overlay))).toEqual([]);
  });

  it("has one Deployment per service, named after it, each with a Service", () => {
    const names = (kind: string) => rendered[overlay]!.filter((o) => o.kind === kind).map((o) => o.metadata.name);
    // dev runs its own PgBouncer in front of PostgreSQL (a Deployment: it keeps no state).
    expect(names("Deployment").filter((n) => n !== "pgbouncer").sort()).toEqual([...SERVICES].sort());
    expect(names("Service")).toEqual(expect.arrayContaining([...SERVICES]));
  });
});

describe("overlay dev", () => {
  it("runs PostgreSQL, Redis and MinIO as StatefulSets, one replica of each service, and generates its Secret", () => {
    const objects = rendered.dev!;
    expect(objects.filter((o) => o.kind === "StatefulSet").map((o) => o.metadata.name).sort()).toEqual(["minio", "postgres", "redis"]);
    for (const o of objects.filter((x) => x.kind === "Deployment")) {
      const hpa = objects.find((x) => x.kind === "HorizontalPodAutoscaler" && x.spec.scaleTargetRef.name === o.metadata.name);
      expect([ref(o), hpa ? hpa.spec.maxReplicas : o.spec.replicas]).toEqual([ref(o), 1]);
    }
    expect(objects.filter((o) => o.kind === "Secret")).toHaveLength(1);
  });

  it("puts a transaction-pooling PgBouncer in front of PostgreSQL: DATABASE_URL through it, DIRECT_URL to PostgreSQL, both from the Secret", () => {
    const objects = rendered.dev!;
    const secret = objects.find((o) => o.kind === "Secret")!;
    const value = (key: string) => new URL(Buffer.from(String(secret.data[key]).replace(/\s+/g, ""), "base64").toString("utf8"));
    expect([value("DATABASE_URL").host, value("DATABASE_URL").searchParams.get("pgbouncer")]).toEqual(["pgbouncer:6432", "true"]);
    expect(value("DIRECT_URL").host).toBe("postgres:5432");
    const pgbouncer = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "pgbouncer")!;
    const env = Object.fromEntries(pgbouncer.spec.template.spec.containers[0].env.map((e: { name: string; value?: string }) => [e.name, e.value]));
    expect([env.POOL_MODE, env.DB_HOST, env.LISTEN_PORT]).toEqual(["transaction", "postgres", "6432"]);
    // The services that need PostgreSQL itself (LISTEN, the retention run's lock) read DIRECT_URL from the Secret.
    for (const name of ["event-ingest", "delivery-worker"]) {
      const app = objects.find((o) => o.kind === "Deployment" && o.metadata.name === name)!.spec.template.spec.containers.find((c: { name: string }) => c.name === "app");
      expect(app.env.find((e: { name: string }) => e.name === "DIRECT_URL")?.valueFrom?.secretKeyRef).toMatchObject({ name: secret.metadata.name, key: "DIRECT_URL" });
    }
  });
});

describe("overlay production", () => {
  it("renders no Secret and no database: it reads the existing Secret vw-secrets and managed services", () => {
    const objects = rendered.production!;
    expect(objects.filter((o) => o.kind === "Secret" || o.kind === "StatefulSet").map(ref)).toEqual([]);
    const secretNames = new Set<string>();
    JSON.stringify(objects, (key, value: { name?: string }) => {
      if (key === "secretKeyRef" && value.name) secretNames.add(value.name);
      return value;
    });
    expect([...secretNames]).toEqual(["vw-secrets"]);
  });

  it("has the ServiceMonitor and the alerts an on-call engineer needs", () => {
    const objects = rendered.production!;
    expect(objects.filter((o) => o.kind === "ServiceMonitor")).toHaveLength(1);
    const alerts = objects
      .filter((o) => o.kind === "PrometheusRule")
      .flatMap((o) => o.spec.groups.flatMap((g: { rules: { alert?: string }[] }) => g.rules.map((r) => r.alert)));
    expect(alerts).toEqual(
      expect.arrayContaining(["VwQueueBacklogGrowing", "VwOldestWaitingDeliveryTooOld", "VwDeliveryFailureRateHigh", "VwEndpointsDisabledInBulk", "VwServiceNotReady"]),
    );
  });

  it("ships every dashboard of infra/grafana, unchanged, in one ConfigMap that Grafana's sidecar picks up", () => {
    const grafanaDir = join(ROOT, "infra", "grafana");
    const files = readdirSync(grafanaDir).filter((f) => f.endsWith(".json")).sort();
    const maps = rendered.production!.filter((o) => o.kind === "ConfigMap" && o.metadata.labels?.grafana_dashboard === "1");
    expect(maps.map((o) => [o.metadata.name, o.metadata.namespace])).toEqual([["vw-grafana-dashboards", "vw"]]);
    const data = maps[0]!.data as Record<string, string>;
    expect(Object.keys(data).sort()).toEqual(files);
    for (const f of files) expect([f, data[f]]).toEqual([f, readFileSync(join(grafanaDir, f), "utf8")]);
    // `kubectl apply` (client side) keeps the whole object in an annotation limited to 256 KiB.
    expect(Buffer.byteLength(JSON.stringify(data))).toBeLessThan(256 * 1024);
  });
});

describe.each(Object.entries(TOPOLOGY_OVERLAYS))("overlay %s (production with components/%s)", (overlay) => {
  const envNames = (o: K8sObject): string[] => o.spec.template.spec.containers[0].env.map((e: { name: string }) => e.name);

  it("renders, and every object passes the schema and the rules (each service's config reader accepts its Redis variables)", async () => {
    expect(await checkManifests(rendered[overlay]!, context("production"))).toEqual([]);
  });

  it("gives every service the topology's variables in place of REDIS_URL, settings from the ConfigMap and passwords from vw-secrets", () => {
    const expected = overlay === "production-sentinel" ? ["REDIS_SENTINELS", "REDIS_SENTINEL_MASTER", "REDIS_SENTINEL_PASSWORD"] : ["REDIS_CLUSTER_NODES"];
    const deployments = rendered[overlay]!.filter((o) => o.kind === "Deployment");
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual([...SERVICES].sort());
    for (const d of deployments) {
      const names = envNames(d);
      expect([ref(d), names.filter((n) => n === "REDIS_URL")]).toEqual([ref(d), []]);
      expect([ref(d), names]).toEqual([ref(d), expect.arrayContaining([...expected, "REDIS_PASSWORD", "REDIS_TLS"])]);
      const env = d.spec.template.spec.containers[0].env as { name: string; valueFrom: { secretKeyRef?: { name: string }; configMapKeyRef?: { name: string } } }[];
      for (const e of env.filter((x) => /PASSWORD/.test(x.name))) expect([e.name, e.valueFrom.secretKeyRef?.name]).toEqual([e.name, "vw-secrets"]);
      for (const e of env.filter((x) => /^REDIS_(SENTINELS|SENTINEL_MASTER|CLUSTER_NODES|TLS)$/.test(x.name))) expect([e.name, e.valueFrom.configMapKeyRef?.name]).toEqual([e.name, expect.stringMatching(/^vw-settings-/)]);
    }
  });

  it("lets the worker reach its Redis nodes (and the sentinels) in the private ranges", () => {
    const policy = rendered[overlay]!.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "delivery-worker-dependencies")!;
    const privatePorts = policy.spec.egress
      .filter((rule: { to: { ipBlock?: { cidr: string } }[] }) => rule.to.some((t) => t.ipBlock?.cidr === "10.0.0.0/8"))
      .flatMap((rule: { ports: { port: number }[] }) => rule.ports.map((p) => p.port));
    expect(privatePorts).toEqual(expect.arrayContaining(overlay === "production-sentinel" ? [6379, 26379] : [6379]));
  });
});

describe("the checker", () => {
  // Each rule can fail: a manifest broken on purpose is reported naming the object and the rule.
  const broken = (mutate: (objects: K8sObject[]) => void): Promise<string[]> => {
    const objects = structuredClone(rendered.dev!);
    mutate(objects);
    return checkManifests(objects, context("dev"));
  };
  const deployment = (objects: K8sObject[], name: string) => objects.find((o) => o.kind === "Deployment" && o.metadata.name === name)!;
  const app = (objects: K8sObject[], name: string) => deployment(objects, name).spec.template.spec.containers[0];

  it.each([
    ["a missing readiness probe", (o: K8sObject[]) => delete app(o, "admin-api").readinessProbe, "Deployment/admin-api: probes: container app: no readinessProbe"],
    ["no memory limit", (o: K8sObject[]) => delete app(o, "event-ingest").resources.limits.memory, "Deployment/event-ingest: resources: container app: no limits.memory"],
    ["root allowed", (o: K8sObject[]) => (app(o, "map-storage").securityContext.allowPrivilegeEscalation = true), "Deployment/map-storage: security context: container app: allowPrivilegeEscalation must be false"],
    ["an image on latest", (o: K8sObject[]) => (app(o, "delivery-worker").image = "vw/delivery-worker:latest"), "Deployment/delivery-worker: images pinned"],
    ["a token in the ConfigMap", (o: K8sObject[]) => (o.find((x) => x.kind === "ConfigMap")!.data.ADMIN_TOKEN = "x"), "no secret in a ConfigMap: key ADMIN_TOKEN"],
    ["an unknown variable", (o: K8sObject[]) => app(o, "admin-api").env.push({ name: "ADMIN_TOKENS", value: "x" }), "Deployment/admin-api: env known to the config reader: ADMIN_TOKENS"],
    ["a required variable left out", (o: K8sObject[]) => (app(o, "event-ingest").env = app(o, "event-ingest").env.filter((e: { name: string }) => e.name !== "INGEST_TOKEN")), "Deployment/event-ingest: required env given: INGEST_TOKEN"],
    ["a value the reader refuses", (o: K8sObject[]) => (o.find((x) => x.kind === "ConfigMap")!.data.ENDPOINT_URL_POLICY = "open"), "Deployment/admin-api: config reader accepts the env: ENDPOINT_URL_POLICY"],
    ["a short grace period", (o: K8sObject[]) => (deployment(o, "delivery-worker").spec.template.spec.terminationGracePeriodSeconds = 10), "Deployment/delivery-worker: termination grace"],
    ["private ranges opened on 443", (o: K8sObject[]) => (o.find((x) => x.metadata.name === "delivery-worker-webhooks")!.spec.egress[0].to[0].ipBlock.except = []), "NetworkPolicy/delivery-worker-webhooks: worker egress: 0.0.0.0/0 on 443 does not except 10.0.0.0/8"],
    ["a field of the wrong type", (o: K8sObject[]) => (app(o, "map-storage").ports[0].containerPort = "3001"), "Deployment/map-storage: schema"],
    ["an install hook", (o: K8sObject[]) => (deployment(o, "admin-api").metadata.annotations = { "helm.sh/hook": "pre-install" }), "Deployment/admin-api: no install hooks"],
    [
      "two Redis topologies at once",
      (o: K8sObject[]) => app(o, "delivery-worker").env.push({ name: "REDIS_CLUSTER_NODES", value: "redis-0:6379" }),
      "Deployment/delivery-worker: config reader accepts the env: REDIS_URL and REDIS_CLUSTER_NODES are both set",
    ],
    [
      "Sentinel without its master name",
      (o: K8sObject[]) => (app(o, "map-storage").env = [...app(o, "map-storage").env.filter((e: { name: string }) => e.name !== "REDIS_URL"), { name: "REDIS_SENTINELS", value: "s-0:26379" }]),
      "Deployment/map-storage: config reader accepts the env: REDIS_SENTINEL_MASTER is required with REDIS_SENTINELS",
    ],
    [
      "QUEUE_SHARDS as one Deployment's own literal",
      (o: K8sObject[]) => {
        const entry = app(o, "event-ingest").env.find((e: { name: string }) => e.name === "QUEUE_SHARDS");
        delete entry.valueFrom;
        entry.value = "8";
      },
      "Deployment/event-ingest: queue shards: QUEUE_SHARDS must come from the ConfigMap vw-settings",
    ],
    [
      "QUEUE_SHARDS left out of a service that queues deliveries",
      (o: K8sObject[]) => (app(o, "admin-api").env = app(o, "admin-api").env.filter((e: { name: string }) => e.name !== "QUEUE_SHARDS")),
      "Deployment/admin-api: queue shards: QUEUE_SHARDS is not given",
    ],
    [
      "QUEUE_SHARDS given to a service that queues none",
      (o: K8sObject[]) => app(o, "map-storage").env.push({ name: "QUEUE_SHARDS", valueFrom: { configMapKeyRef: { name: "vw-settings", key: "QUEUE_SHARDS" } } }),
      "Deployment/map-storage: queue shards: QUEUE_SHARDS is given to map-storage, which queues no deliveries",
    ],
    ["a Redis variable no service reads", (o: K8sObject[]) => app(o, "event-ingest").env.push({ name: "REDIS_SENTINEL_NAME", value: "mymaster" }), "Deployment/event-ingest: env known to the config reader: REDIS_SENTINEL_NAME"],
  ])("reports %s", async (_what, mutate, expected) => {
    const violations = await broken(mutate);
    expect(violations.some((m) => m.includes(expected))).toBe(true);
  });
});
