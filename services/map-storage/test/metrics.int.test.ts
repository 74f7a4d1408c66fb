/**
 * `/metrics` of map-storage after real traffic: `GET /metrics` answers metrics (not a path
 * error from the files API), the text parses, and every file request is counted under the one
 * files template whatever world or path it named; a missing file's 404 included.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { parsePrometheusText, sampleSum, type PromExposition } from "@vw/testing";
import { FILES_ROUTE_TEMPLATE } from "../src/files/files.routes.js";
import { createTestWorld, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";

const HTTP = "vw_http_request_duration_seconds_count";
let ms: RunningMapStorage;
let prisma: PrismaClient;
let world: TestWorld;

beforeAll(async () => {
  ms = await startMapStorage();
  prisma = testPrisma();
  world = await createTestWorld(prisma);
});
afterAll(async () => {
  await ms?.close();
  await prisma?.$disconnect();
});

async function scrape(): Promise<PromExposition> {
  const res = await fetch(`${ms.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await res.text());
}

describe("GET /metrics on map-storage", () => {
  it("serves metrics, and counts file requests under one route template with their status", async () => {
    const before = await scrape();
    expect(before.types.get("nodejs_eventloop_lag_seconds")).toBe("gauge");
    const base = `${ms.baseUrl}/${world.org}/${world.world}`;
    const put = await fetch(`${base}/notes/readme.txt`, { method: "PUT", headers: { Authorization: `Bearer ${world.token}` }, body: "hello" });
    expect(put.status).toBe(201);
    expect((await fetch(`${base}/notes/readme.txt`)).status).toBe(200);
    expect((await fetch(`${base}/notes/missing.txt`)).status).toBe(404);
    expect((await fetch(`${base}/notes/other.txt`, { method: "PUT", body: "x" })).status).toBe(401);

    const after = await scrape();
    const delta = (labels: Record<string, string>): number => sampleSum(after, HTTP, labels) - sampleSum(before, HTTP, labels);
    expect(delta({ route: FILES_ROUTE_TEMPLATE, method: "PUT", status: "201" })).toBe(1);
    expect(delta({ route: FILES_ROUTE_TEMPLATE, method: "GET", status: "200" })).toBe(1);
    expect(delta({ route: FILES_ROUTE_TEMPLATE, method: "GET", status: "404" })).toBe(1);
    expect(delta({ route: FILES_ROUTE_TEMPLATE, method: "PUT", status: "401" })).toBe(1);
    // The scrape before this one is counted under its own route.
    expect(delta({ route: "/metrics", method: "GET", status: "200" })).toBeGreaterThanOrEqual(1);
    expect(after.samples.some((s) => Object.values(s.labels).some((v) => v.includes(world.world) || v.includes("readme")))).toBe(false);
  });
});
