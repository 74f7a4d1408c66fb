/**
 * infra/grafana against the real services: the four deployables run as their own processes (on
 * the test run's PostgreSQL, Redis and S3), their `/metrics` is scraped, and every query of every
 * dashboard must parse and name only metrics that some service exports. A renamed metric, or a
 * dashboard query with a typo, fails here instead of showing an empty panel in production.
 */
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { parsePrometheusText, spawnService, testKeyPrefix, type PromExposition, type ServiceProcess } from "@vw/testing";
import { checkDashboards, dashboardQueries, exportedNames, loadDashboards, metricNames, type DashboardFile } from "./grafana-rules.js";
import { SERVICES } from "./k8s-rules.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const dashboards: DashboardFile[] = loadDashboards(join(ROOT, "infra", "grafana"));
const processes: ServiceProcess[] = [];
const expositions = new Map<string, PromExposition>();

beforeAll(async () => {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error("DATABASE_URL is not set: run the tests through jest (test/global-setup.js)");
  // The S3_* variables of the run's s3rver come through process.env, which spawnService passes on.
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    REDIS_KEY_PREFIX: testKeyPrefix("grafana-"),
    ADMIN_TOKEN: "grafana-admin-token-0123456789-7c3e9a1f",
    INGEST_TOKEN: "grafana-ingest-token-0123456789-5b2d8046",
    SECRETS_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    PUBLIC_MAP_STORAGE_URL: "https://maps.example.test",
    PLAY_URL: "https://play.example.test",
    LOG_LEVEL: "error",
  };
  const started = await Promise.allSettled(SERVICES.map((s) => spawnService(join(ROOT, "services", s), env, { readyTimeoutMs: 90_000 })));
  for (const r of started) if (r.status === "fulfilled") processes.push(r.value);
  const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
  for (const [i, service] of SERVICES.entries()) {
    const res = await fetch(`${processes[i]!.url}/metrics`);
    if (res.status !== 200) throw new Error(`${service} /metrics answered ${res.status}`);
    expositions.set(service, parsePrometheusText(await res.text()));
  }
}, 150_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
});

describe("the Grafana dashboards", () => {
  it("are the delivery pipeline and the HTTP services", () => {
    expect(dashboards.map((d) => d.file)).toEqual(["delivery-pipeline.json", "http-services.json"]);
  });

  it("were checked against every service's exposition", () => {
    // Each process answered with its own families: the worker's queues, the intake's batches.
    for (const service of SERVICES) expect([service, expositions.get(service)?.types.get("vw_http_request_duration_seconds")]).toEqual([service, "histogram"]);
    expect(expositions.get("delivery-worker")!.types.get("vw_delivery_attempts_total")).toBe("counter");
    expect(expositions.get("event-ingest")!.types.get("vw_ingest_batch_requests")).toBe("histogram");
  });

  it("parse, and name only metrics that a service exports", () => {
    const exported = exportedNames([...expositions.values()]);
    expect(checkDashboards(dashboards, exported)).toEqual([]);
    // Not vacuous: dozens of queries naming the worker's, the intake's and Node's metrics.
    const named = new Set(dashboards.flatMap(dashboardQueries).flatMap((q) => metricNames(q.expr).names));
    expect([...named]).toEqual(
      expect.arrayContaining([
        "vw_queue_jobs",
        "vw_delivery_attempts_total",
        "vw_delivery_first_attempt_lag_seconds_bucket",
        "vw_endpoints_disabled_total",
        "vw_http_request_duration_seconds_bucket",
        "vw_ingest_batch_requests_sum",
        "process_cpu_seconds_total",
      ]),
    );
  });

  describe("the checker", () => {
    const exported = (): Set<string> => exportedNames([...expositions.values()]);
    const mutated = (mutate: (d: DashboardFile[]) => void): string[] => {
      const copy = structuredClone(dashboards);
      mutate(copy);
      return checkDashboards(copy, exported());
    };
    const firstTarget = (d: DashboardFile[]) => (d[0]!.json.panels as { targets?: { expr: string }[] }[]).find((p) => p.targets)!.targets![0]!;

    it("reports a metric no service exports, naming the file, panel and metric", () => {
      const violations = mutated((d) => (firstTarget(d).expr = "sum(rate(vw_delivery_attempt_total[5m]))"));
      expect(violations).toEqual([expect.stringMatching(/^delivery-pipeline\.json: panel ".+" \(id \d+\) target A: vw_delivery_attempt_total is exported by no service/)]);
    });

    it("counts histogram suffixes as exported, but not on a counter", () => {
      const names = exported();
      expect(["vw_delivery_attempt_duration_seconds_bucket", "vw_delivery_attempt_duration_seconds_sum", "vw_delivery_attempt_duration_seconds_count"].every((n) => names.has(n))).toBe(true);
      expect(names.has("vw_delivery_attempts_total_bucket")).toBe(false);
    });

    it("reports a query that does not parse, and a selector without a metric name", () => {
      expect(mutated((d) => (firstTarget(d).expr = "sum(rate(vw_queue_jobs[5m])"))).toEqual([expect.stringContaining("does not parse")]);
      expect(mutated((d) => (firstTarget(d).expr = '{__name__=~"vw_.+"}'))).toEqual([expect.stringContaining("selector without a metric name")]);
    });

    it("reads template variables too", () => {
      const violations = mutated((d) => {
        const v = d[1]!.json.templating!.list!.find((x) => x.name === "job")!;
        v.query = { query: "label_values(vw_http_requests_total, job)" };
      });
      expect(violations).toEqual([expect.stringMatching(/^http-services\.json: variable \$job: vw_http_requests_total is exported by no service/)]);
    });

    it("reports a panel on a fixed data source", () => {
      const violations = mutated((d) => ((d[0]!.json.panels![1] as { datasource: unknown }).datasource = { type: "prometheus", uid: "prod-prometheus" }));
      expect(violations).toEqual([expect.stringContaining("not the $datasource variable")]);
    });
  });
});
