import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Validator } from "@seriousme/openapi-schema-validator";
import { compareRoutes, registeredRoutes } from "@vw/testing";
import { startMapStorage, type RunningMapStorage } from "./harness.js";

let ms: RunningMapStorage;
beforeAll(async () => {
  ms = await startMapStorage();
});
afterAll(async () => {
  await ms.close();
});

describe("GET /openapi.json", () => {
  it("is served without a key: a valid OpenAPI 3.1 document", async () => {
    const res = await fetch(`${ms.baseUrl}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const result = await new Validator().validate((await res.json()) as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
  });

  it("describes every route map-storage registers, and only those", async () => {
    const doc = (await (await fetch(`${ms.baseUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const routes = registeredRoutes(ms.app);
    expect(routes.some((r) => r.pattern !== undefined && r.method === "put")).toBe(true);
    expect(compareRoutes(routes, doc)).toEqual({ undocumented: [], unregistered: [] });
  });
});

describe("paths that can never be a file", () => {
  it.each(["/", "/metrics-nothing", "/acme", "/acme/hq", "/acme/hq?x=1"])("GET %s is a 404 problem, not a path-syntax 400", async (path) => {
    const res = await fetch(`${ms.baseUrl}${path}`);
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(((await res.json()) as { type: string }).type).toBe("/problems/not-found");
  });
});
