import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { TEST_DASHBOARD_ASSET, TEST_DASHBOARD_INDEX, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi();
});
afterAll(async () => {
  await api.close();
});

const page = (path: string, harness = api) => fetch(`${harness.baseUrl}${path}`, { redirect: "manual" });

const EXPECTED_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

describe("GET /dashboard/ (the built page)", () => {
  it("serves index.html with a strict CSP: no inline script, no outside host, not frameable", async () => {
    const res = await page("/dashboard/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await res.text()).toBe(TEST_DASHBOARD_INDEX);
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toBe(EXPECTED_CSP);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  });

  it("serves index.html for the page's own routes (sub-paths without an extension)", async () => {
    for (const path of ["/dashboard/endpoints", "/dashboard/endpoints/0b9c0e55-3f43-4c1e-9a43-1c8a4a7d2f10/deliveries", "/dashboard/?from=platform"]) {
      const res = await page(path);
      expect({ path, status: res.status, body: await res.text() }).toEqual({ path, status: 200, body: TEST_DASHBOARD_INDEX });
      expect(res.headers.get("content-security-policy")).toBe(EXPECTED_CSP);
    }
  });

  it("caches hashed assets for a year and answers a missing file with a 404 problem, not the page", async () => {
    const asset = await page(`/dashboard${TEST_DASHBOARD_ASSET.path}`);
    expect(asset.status).toBe(200);
    expect(await asset.text()).toBe(TEST_DASHBOARD_ASSET.body);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(asset.headers.get("content-security-policy")).toBe(EXPECTED_CSP);
    const missing = await api.request("GET", "/dashboard/assets/index-00000000.js", { token: null });
    expectProblem(missing, 404);
  });

  it("redirects /dashboard to /dashboard/", async () => {
    const res = await page("/dashboard");
    expect(res.status).toBe(301);
    expect(res.headers.get("location")).toBe("/dashboard/");
    expect((await page("/dashboard?x=1")).headers.get("location")).toBe("/dashboard/?x=1");
  });

  it("never serves a file outside the built folder", async () => {
    for (const path of ["/dashboard/../package.json", "/dashboard/%2e%2e/%2e%2e/package.json", "/dashboard/..%2f..%2fpackage.json", "/dashboard/.env"]) {
      const res = await page(path);
      const text = await res.text();
      expect(text).not.toContain('"name"');
      expect([200, 400, 403, 404]).toContain(res.status);
      if (res.status === 200) expect(text).toBe(TEST_DASHBOARD_INDEX);
      else expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    }
  });

  it("says the dashboard is not built when its folder has no index.html", async () => {
    const empty = await mkdtemp(join(tmpdir(), "vw-dashboard-empty-"));
    const bare = await startAdminApi({ dashboardAssetsDir: empty });
    try {
      const res = await bare.request("GET", "/dashboard/", { token: null });
      expectProblem(res, 404, "not-found");
      expect(res.body.detail).toMatch(/not built.*pnpm build/);
    } finally {
      await bare.close();
      await rm(empty, { recursive: true, force: true });
    }
  });
});

describe("DASHBOARD_FRAME_ANCESTORS", () => {
  it("lets exactly the listed origins embed the page (frame-ancestors), without X-Frame-Options", async () => {
    const embedded = await startAdminApi({ dashboardFrameAncestors: ["https://platform.example.com", "https://*.customers.example.org"] });
    try {
      const res = await page("/dashboard/", embedded);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-security-policy")).toBe(
        EXPECTED_CSP.replace("frame-ancestors 'none'", "frame-ancestors https://platform.example.com https://*.customers.example.org"),
      );
      expect(res.headers.get("x-frame-options")).toBeNull();
    } finally {
      await embedded.close();
    }
  });
});
