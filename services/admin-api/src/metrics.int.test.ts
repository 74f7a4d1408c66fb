/**
 * `/metrics` of admin-api after real traffic: Prometheus text that parses, Node's default
 * metrics, and the HTTP histogram labelled by route template (never by slug), a 404 thrown by a
 * route handler keeping its route's template and an unknown path labelled `unmatched`.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { findSamples, parsePrometheusText, sampleSum, type PromExposition } from "@vw/testing";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";

const HTTP = "vw_http_request_duration_seconds_count";
let api: AdminApiHarness;

beforeAll(async () => {
  api = await startAdminApi();
});
afterAll(async () => {
  await api.close();
});

async function scrape(): Promise<{ text: string; exp: PromExposition }> {
  const res = await fetch(`${api.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, exp: parsePrometheusText(text) };
}

describe("GET /metrics on admin-api", () => {
  it("needs no token and serves Node's process and event-loop metrics", async () => {
    const { exp } = await scrape();
    expect(exp.types.get("process_cpu_user_seconds_total")).toBe("counter");
    expect(exp.types.get("nodejs_eventloop_lag_seconds")).toBe("gauge");
    expect(exp.types.get("vw_http_request_duration_seconds")).toBe("histogram");
  });

  it("counts requests by route template, method and status; a handler's 404 keeps its template, an unknown path is `unmatched`", async () => {
    const before = (await scrape()).exp;
    const slug = api.slug("metrics");
    expect((await api.request("POST", "/admin/v1/organizations", { body: { slug, name: "Metrics" } })).status).toBe(201);
    expect((await api.request("GET", `/admin/v1/organizations/${slug}`)).status).toBe(200);
    const missing = api.slug("missing");
    expect((await api.request("GET", `/admin/v1/organizations/${missing}`)).status).toBe(404);
    expect((await api.request("GET", `/admin/v1/organizations/${missing}`)).status).toBe(404);
    expect((await api.request("GET", `/no/such/${missing}`)).status).toBe(404);

    const { text, exp } = await scrape();
    const delta = (labels: Record<string, string>): number => sampleSum(exp, HTTP, labels) - sampleSum(before, HTTP, labels);
    expect(delta({ route: "/admin/v1/organizations", method: "POST", status: "201" })).toBe(1);
    expect(delta({ route: "/admin/v1/organizations/:org", method: "GET", status: "200" })).toBe(1);
    expect(delta({ route: "/admin/v1/organizations/:org", method: "GET", status: "404" })).toBe(2);
    expect(delta({ route: "unmatched", method: "GET", status: "404" })).toBe(1);
    // Durations are observed, not just counted.
    const [sum] = findSamples(exp, "vw_http_request_duration_seconds_sum", { route: "/admin/v1/organizations", method: "POST", status: "201" });
    expect(sum!.value).toBeGreaterThan(0);
    // No series carries what a client typed.
    expect(text).not.toContain(slug);
    expect(text).not.toContain(missing);
  });
});
