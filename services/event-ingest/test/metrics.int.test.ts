/**
 * `/metrics` of event-ingest after real traffic: Prometheus text that parses, Node's default
 * metrics and the HTTP histogram by route template; a 404 and a refused request are counted
 * with bounded labels only.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { parsePrometheusText, sampleSum, type PromExposition } from "@vw/testing";
import { makeEvent } from "./fixtures.js";
import { startIngest, type IngestHarness, type TestWorld } from "./harness.js";

const HTTP = "vw_http_request_duration_seconds_count";
let api: IngestHarness;
let world: TestWorld;

beforeAll(async () => {
  api = await startIngest();
  world = await api.createWorld();
  await api.createEndpoint(world, { subscriptions: ["visitor"] });
});
afterAll(async () => {
  await api?.close();
});

async function scrape(): Promise<PromExposition> {
  const res = await fetch(`${api.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await res.text());
}

describe("GET /metrics on event-ingest", () => {
  it("needs no token and counts accepted events, refusals and 404s by route template", async () => {
    const before = await scrape();
    expect(before.types.get("nodejs_eventloop_lag_seconds")).toBe("gauge");
    expect(before.types.get("process_resident_memory_bytes")).toBe("gauge");

    const accepted = await api.post(makeEvent(world));
    expect(accepted.status).toBe(202);
    expect((await api.post({ id: "x" })).status).toBe(400);
    expect((await api.request("GET", `/v1/nothing-${world.slug}`)).status).toBe(404);

    const after = await scrape();
    const delta = (labels: Record<string, string>): number => sampleSum(after, HTTP, labels) - sampleSum(before, HTTP, labels);
    expect(delta({ route: "/v1/events", method: "POST", status: "202" })).toBe(1);
    expect(delta({ route: "/v1/events", method: "POST", status: "400" })).toBe(1);
    expect(delta({ route: "unmatched", method: "GET", status: "404" })).toBe(1);
    expect(after.samples.some((s) => Object.values(s.labels).some((v) => v.includes(world.slug)))).toBe(false);
  });
});
