import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Validator } from "@seriousme/openapi-schema-validator";
import { ADMIN_MIDDLEWARE_PATHS, DELIVERED_EVENT_TYPES, LEGACY_AUTH_WEBHOOK } from "@vw/contracts";
import { compareRoutes, registeredRoutes } from "@vw/testing";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi();
});
afterAll(async () => {
  await api.close();
});

describe("GET /openapi.json", () => {
  it("is served without a token, as JSON", async () => {
    const res = await api.request("GET", "/openapi.json", { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body.openapi).toBe("3.1.0");
  });

  it("has one webhooks entry per delivered type (plus the legacy member.connecting body), each with the payload's schema", async () => {
    const { body } = await api.request("GET", "/openapi.json", { token: null });
    expect(Object.keys(body.webhooks).sort()).toEqual([...DELIVERED_EVENT_TYPES, LEGACY_AUTH_WEBHOOK].sort());
    for (const type of DELIVERED_EVENT_TYPES) {
      const schema = body.webhooks[type].post.requestBody.content["application/json"].schema;
      expect(JSON.stringify(schema)).toMatch(/#\/components\/schemas\//);
    }
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    const { body } = await api.request("GET", "/openapi.json", { token: null });
    const result = await new Validator().validate(body);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
  });

  it("describes every route admin-api registers, and only those", async () => {
    const { body } = await api.request("GET", "/openapi.json", { token: null });
    const routes = registeredRoutes(api.app);
    expect(routes.length).toBeGreaterThan(20);
    expect(routes.map((r) => `${r.method} ${r.path}`)).toEqual(expect.arrayContaining(["post /dashboard/api/session", "post /admin/v1/worlds/{org}/{world}/dashboard-sessions"]));
    expect(compareRoutes(routes, body, { middlewarePaths: ADMIN_MIDDLEWARE_PATHS })).toEqual({ undocumented: [], unregistered: [] });
  });

  it("requires the admin token on every /admin/v1 operation, or a session cookie on those of a world except minting", async () => {
    const { body } = await api.request("GET", "/openapi.json", { token: null });
    const admin = [{ adminToken: [] }];
    for (const [path, item] of Object.entries(body.paths as Record<string, Record<string, { security: unknown[] }>>)) {
      for (const op of Object.values(item)) {
        if (!path.startsWith("/admin/v1/")) continue;
        const sessionToo = path.startsWith("/admin/v1/worlds/") && !path.endsWith("/dashboard-sessions");
        expect({ path, security: op.security }).toEqual({ path, security: sessionToo ? [...admin, { dashboardSession: [] }] : admin });
      }
    }
    expect(body.paths["/healthz"].get.security).toEqual([]);
  });

  it("answers other methods with 405 and Allow", async () => {
    const res = await api.request("POST", "/openapi.json", { token: null, body: {} });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });
});
