/**
 * docker-compose.yml runs what infra/k8s runs: per service, the same image, the same variable
 * names, a health check on the readiness probe's path, and the migrate image; the worker's stop
 * grace equals its termination grace. Compared with the dev overlay as kustomize renders it.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "@jest/globals";
import { parse } from "yaml";
import { SERVICES, renderKustomization, type K8sObject } from "./k8s-rules.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

interface ComposeService {
  image?: string;
  build?: { target?: string; args?: Record<string, string> };
  environment?: Record<string, string>;
  healthcheck?: { test?: string[] };
  stop_grace_period?: string;
}

let compose: { name?: string; services: Record<string, ComposeService> };
let deployments: Map<string, K8sObject>;

beforeAll(() => {
  compose = parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true });
  deployments = new Map(
    renderKustomization(join(ROOT, "infra", "k8s", "overlays", "dev"))
      .filter((o) => o.kind === "Deployment")
      .map((o) => [o.metadata.name, o]),
  );
});

const seconds = (d: string | undefined): number => Number(/^(\d+)s$/.exec(d ?? "")?.[1] ?? NaN);

describe("docker-compose.yml against infra/k8s", () => {
  it("has no top-level name (Compose v1, Debian's docker-compose 1.29, refuses it)", () => {
    expect(compose.name).toBeUndefined();
  });

  it.each([...SERVICES])("%s: same image, built from the runtime target for that service", (name) => {
    const service = compose.services[name]!;
    const app = deployments.get(name)!.spec.template.spec.containers.find((c: { name: string }) => c.name === "app");
    expect(service.image).toBe(app.image);
    expect(service.build).toMatchObject({ target: "runtime", args: { SERVICE: name } });
  });

  it.each([...SERVICES])("%s: the same variables as its Deployment, and a health check on the readiness path", (name) => {
    const service = compose.services[name]!;
    const spec = deployments.get(name)!.spec.template.spec;
    const app = spec.containers.find((c: { name: string }) => c.name === "app");
    expect(Object.keys(service.environment ?? {}).sort()).toEqual(app.env.map((e: { name: string }) => e.name).sort());
    expect(service.healthcheck?.test?.slice(1)).toEqual(["node", "infra/docker/healthcheck.mjs", app.readinessProbe.httpGet.path]);
    const migrate = spec.initContainers.find((c: { name: string }) => c.name === "migrate");
    expect(compose.services.migrate!.image).toBe(migrate.image);
  });

  it("stops the worker with the grace period its Deployment gives it", () => {
    const grace = deployments.get("delivery-worker")!.spec.template.spec.terminationGracePeriodSeconds;
    expect(seconds(compose.services["delivery-worker"]!.stop_grace_period)).toBe(grace);
  });
});
