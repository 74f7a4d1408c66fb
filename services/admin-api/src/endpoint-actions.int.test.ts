import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { CURRENT_API_VERSION } from "@vw/contracts";
import { generateSecretBoxKey, parseSecret } from "@vw/webhook-core";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { createEndpoint, expectEndpointShape, expectProblem, fakeDns, rawRow, worldWithEndpoints } from "../test/endpoint-fixtures.js";

const KEY = generateSecretBoxKey();
let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi({ resolveHost: fakeDns().resolve, secretsEncryptionKey: KEY });
});
afterAll(async () => {
  await api.close();
});

const row = (id: string) => api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } });

async function importLegacy(endpoints: string, url = "https://hooks.example.com/legacy") {
  const res = await api.request("POST", `${endpoints}/import-legacy`, { body: { url } });
  expect(res.status).toBe(201);
  return res.body as { id: string; [k: string]: any };
}

describe("POST .../endpoints/{id}/disable and /enable", () => {
  it("disables by hand (reason manual), idempotently, keeping the first disabledAt", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    const before = Date.now();
    const res = await api.request("POST", `${endpoints}/${id}/disable`);
    expect(res.status).toBe(200);
    expectEndpointShape(res.body);
    expect(res.body).toMatchObject({ id, enabled: false, disabledReason: "manual", disabledAt: expect.any(String), hasSecret: true });
    expect(Date.parse(res.body.disabledAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(await row(id)).toMatchObject({ enabled: false, disabledReason: "manual" });
    const again = await api.request("POST", `${endpoints}/${id}/disable`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(res.body);
    expect((await api.request("GET", `${endpoints}/${id}`)).body).toEqual(res.body);
  });

  it("keeps the worker's reason when an endpoint it disabled is disabled again by hand", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    const disabledAt = new Date("2026-01-02T03:04:05.678Z");
    await api.prisma.webhookEndpoint.update({ where: { id }, data: { enabled: false, disabledReason: "gone", disabledAt } });
    const res = await api.request("POST", `${endpoints}/${id}/disable`);
    expect(res.body).toMatchObject({ enabled: false, disabledReason: "gone", disabledAt: disabledAt.toISOString() });
  });

  it("re-enables: clears reason and time and resets the failure count; idempotent", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id, secret } = await createEndpoint(api, endpoints);
    await api.prisma.webhookEndpoint.update({
      where: { id },
      data: { enabled: false, disabledReason: "failures", disabledAt: new Date(), consecutiveFailures: 50 },
    });
    expect((await api.request("GET", `${endpoints}/${id}`)).body).toMatchObject({ enabled: false, disabledReason: "failures" });
    const res = await api.request("POST", `${endpoints}/${id}/enable`);
    expect(res.status).toBe(200);
    expectEndpointShape(res.body);
    expect(res.body).toMatchObject({ id, enabled: true, disabledReason: null, disabledAt: null });
    const stored = await row(id);
    expect(stored).toMatchObject({ enabled: true, disabledReason: null, disabledAt: null, consecutiveFailures: 0, secretVersion: 0 });
    expect(api.secretBox.open(stored.secretSealed!)).toBe(secret);

    // Enabling an enabled endpoint changes nothing, not even a failure count the worker is keeping.
    await api.prisma.webhookEndpoint.update({ where: { id }, data: { consecutiveFailures: 7 } });
    const before = (await api.request("GET", `${endpoints}/${id}`)).body;
    const again = await api.request("POST", `${endpoints}/${id}/enable`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(before);
    expect((await row(id)).consecutiveFailures).toBe(7);
  });

  it("goes back and forth: disabled by hand, enabled, disabled again with a new time", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    const first = (await api.request("POST", `${endpoints}/${id}/disable`)).body;
    expect((await api.request("POST", `${endpoints}/${id}/enable`)).body.enabled).toBe(true);
    const second = (await api.request("POST", `${endpoints}/${id}/disable`)).body;
    expect(second).toMatchObject({ enabled: false, disabledReason: "manual" });
    expect(Date.parse(second.disabledAt)).toBeGreaterThanOrEqual(Date.parse(first.disabledAt));
  });

  it("answers 404 for unknown, malformed and foreign ids, 405 for other methods", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { endpoints: other } = await worldWithEndpoints(api);
    const foreign = await createEndpoint(api, other);
    for (const action of ["disable", "enable", "rotate-secret"]) {
      for (const id of [foreign.id, "nope", "3f1c9a5e-8a0b-4c55-9c61-5d2b8f0e7a11"]) {
        expectProblem(await api.request("POST", `${endpoints}/${id}/${action}`), 404, "not-found");
      }
      const res = await api.request("GET", `${endpoints}/${foreign.id}/${action}`);
      expectProblem(res, 405, "method-not-allowed");
      expect(res.headers.get("allow")).toBe("POST");
    }
    expect(await row(foreign.id)).toMatchObject({ enabled: true, secretVersion: 0 });
  });
});

describe("POST .../endpoints/{id}/rotate-secret", () => {
  it("replaces the secret at once: new whsec_ secret once, no-store, old one gone from the database, secretVersion + 1", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { secret: oldSecret, ...created } = await createEndpoint(api, endpoints);
    const oldSealed = (await row(created.id)).secretSealed!;
    const res = await api.request("POST", `${endpoints}/${created.id}/rotate-secret`);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expectEndpointShape(res.body, true);
    expect(res.body).toEqual({ ...created, updatedAt: expect.any(String), secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+={0,2}$/) });
    expect(parseSecret(res.body.secret).length).toBeGreaterThanOrEqual(24);
    expect(res.body.secret).not.toBe(oldSecret);

    const stored = await row(created.id);
    expect(stored.secretSealed).not.toBe(oldSealed);
    expect(api.secretBox.open(stored.secretSealed!)).toBe(res.body.secret);
    expect(stored.secretVersion).toBe(1);
    expect(stored.secretRotatedAt).toBeInstanceOf(Date);
    const raw = await rawRow(api, created.id);
    for (const s of [oldSecret, res.body.secret]) expect(raw).not.toContain(s.slice("whsec_".length));

    const again = await api.request("POST", `${endpoints}/${created.id}/rotate-secret`);
    expect(again.body.secret).not.toBe(res.body.secret);
    expect((await row(created.id)).secretVersion).toBe(2);
    expect((await api.request("GET", `${endpoints}/${created.id}`)).text).not.toContain(again.body.secret);
  });

  it("keeps the last of two concurrent rotations: the stored secret is the one with the higher version", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    const [a, b] = await Promise.all([1, 2].map(() => api.request("POST", `${endpoints}/${id}/rotate-secret`)));
    expect([a!.status, b!.status]).toEqual([200, 200]);
    const stored = await row(id);
    expect(stored.secretVersion).toBe(2);
    expect([a!.body.secret, b!.body.secret]).toContain(api.secretBox.open(stored.secretSealed!));
  });

  it("works on a disabled endpoint and leaves it disabled", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    await api.request("POST", `${endpoints}/${id}/disable`);
    const res = await api.request("POST", `${endpoints}/${id}/rotate-secret`);
    expect(res.body).toMatchObject({ enabled: false, disabledReason: "manual" });
  });

  it("gives a legacy endpoint without a secret its first one", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const legacy = await importLegacy(endpoints);
    const res = await api.request("POST", `${endpoints}/${legacy.id}/rotate-secret`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ format: "legacy", hasSecret: true, subscriptions: ["auth"], secret: expect.stringMatching(/^whsec_/) });
    const stored = await row(legacy.id);
    expect(api.secretBox.open(stored.secretSealed!)).toBe(res.body.secret);
    expect(stored.secretVersion).toBe(1);
  });
});

describe("PUT .../endpoints/{id}/format", () => {
  it("switches current → legacy → current keeping the secret, its version, state and apiVersion", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { secret, ...created } = await createEndpoint(api, endpoints);
    await api.request("POST", `${endpoints}/${created.id}/disable`);
    const toLegacy = await api.request("PUT", `${endpoints}/${created.id}/format`, { body: { format: "legacy" } });
    expect(toLegacy.status).toBe(200);
    expectEndpointShape(toLegacy.body);
    expect(toLegacy.body).toMatchObject({ format: "legacy", hasSecret: true, enabled: false, disabledReason: "manual", apiVersion: CURRENT_API_VERSION });
    expect(toLegacy.body.secret).toBeUndefined();
    let stored = await row(created.id);
    expect(api.secretBox.open(stored.secretSealed!)).toBe(secret);
    expect(stored).toMatchObject({ format: "legacy", secretVersion: 0 });

    const back = await api.request("PUT", `${endpoints}/${created.id}/format`, { body: { format: "current" } });
    expect(back.body).toMatchObject({ format: "current", hasSecret: true, enabled: false });
    stored = await row(created.id);
    expect(api.secretBox.open(stored.secretSealed!)).toBe(secret);
    expect(stored.secretVersion).toBe(0);
  });

  it("setting the format an endpoint already has changes nothing", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { secret: _secret, ...created } = await createEndpoint(api, endpoints);
    const res = await api.request("PUT", `${endpoints}/${created.id}/format`, { body: { format: "current" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created);
  });

  it("refuses the current format for an endpoint without a secret (409) until one is generated", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const legacy = await importLegacy(endpoints);
    const refused = await api.request("PUT", `${endpoints}/${legacy.id}/format`, { body: { format: "current" } });
    expectProblem(refused, 409, "endpoint-secret-required");
    expect(refused.body.errors).toEqual([{ pointer: "/format", detail: expect.any(String) }]);
    expect((await row(legacy.id)).format).toBe("legacy");

    const { secret } = (await api.request("POST", `${endpoints}/${legacy.id}/rotate-secret`)).body;
    const switched = await api.request("PUT", `${endpoints}/${legacy.id}/format`, { body: { format: "current" } });
    expect(switched.status).toBe(200);
    expect(switched.body).toMatchObject({ format: "current", hasSecret: true });
    expect(api.secretBox.open((await row(legacy.id)).secretSealed!)).toBe(secret);
  });

  it("refuses bad bodies with a pointer; 404 for a foreign endpoint; 405 for other methods", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { endpoints: other } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    const foreign = await createEndpoint(api, other);
    const cases: Array<[unknown, string]> = [
      [{ format: "v2" }, "/format"],
      [{}, "/format"],
      [{ format: "legacy", url: "https://x.example.com" }, "/url"],
      [["legacy"], ""],
    ];
    for (const [body, pointer] of cases) {
      const res = await api.request("PUT", `${endpoints}/${id}/format`, { body });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([pointer]);
    }
    expectProblem(await api.request("PUT", `${endpoints}/${id}/format`), 400, "invalid-request");
    expectProblem(await api.request("PUT", `${endpoints}/${foreign.id}/format`, { body: { format: "legacy" } }), 404);
    expect((await row(foreign.id)).format).toBe("current");
    const patch = await api.request("PATCH", `${endpoints}/${id}/format`, { body: { format: "legacy" } });
    expectProblem(patch, 405);
    expect(patch.headers.get("allow")).toBe("PUT");
  });
});

describe("POST .../endpoints/import-legacy", () => {
  it("creates a legacy endpoint subscribed to auth, with no secret anywhere", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const res = await api.request("POST", `${endpoints}/import-legacy`, { body: { url: "https://hooks.example.com/old-hook" } });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe(`${endpoints}/${res.body.id}`);
    expectEndpointShape(res.body);
    expect(res.body).toEqual({
      id: expect.any(String),
      url: "https://hooks.example.com/old-hook",
      subscriptions: ["auth"],
      enabled: true,
      format: "legacy",
      apiVersion: CURRENT_API_VERSION,
      hasSecret: false,
      disabledReason: null,
      disabledAt: null,
      rateLimitPerSecond: null,
      headerNames: [],
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(await row(res.body.id)).toMatchObject({ secretSealed: null, secretVersion: 0, format: "legacy" });
    expect((await api.request("GET", `${endpoints}/${res.body.id}`)).body.hasSecret).toBe(false);
  });

  it("refuses other members and a missing url; 404 for an unknown world; 405 for GET", async () => {
    const { org, endpoints } = await worldWithEndpoints(api);
    const extra = await api.request("POST", `${endpoints}/import-legacy`, { body: { url: "https://hooks.example.com/", subscriptions: ["recording"] } });
    expectProblem(extra, 400, "invalid-request");
    expect(extra.body.errors).toEqual([{ pointer: "/subscriptions", detail: "is not allowed" }]);
    const missing = await api.request("POST", `${endpoints}/import-legacy`, { body: {} });
    expect(missing.body.errors).toEqual([{ pointer: "/url", detail: "is required" }]);
    expectProblem(await api.request("POST", `/admin/v1/worlds/${org}/nope/endpoints/import-legacy`, { body: { url: "https://hooks.example.com/" } }), 404);
    const get = await api.request("GET", `${endpoints}/import-legacy`);
    expectProblem(get, 405);
    expect(get.headers.get("allow")).toBe("POST");
    expect((await api.request("GET", endpoints)).body.items).toEqual([]);
  });
});

describe("apiVersion", () => {
  it("is frozen at creation: a later release with a newer version edits, rotates, switches and toggles without changing it", async () => {
    const later = await startAdminApi({ resolveHost: fakeDns().resolve, secretsEncryptionKey: KEY, currentApiVersion: "2027-06-01" });
    try {
      const { endpoints } = await worldWithEndpoints(api);
      const { id } = await createEndpoint(api, endpoints);
      const legacy = await importLegacy(endpoints);
      const answers = [
        await later.request("PATCH", `${endpoints}/${id}`, { body: { url: "https://other-hooks.example.com/", subscriptions: ["visitor"] } }),
        await later.request("POST", `${endpoints}/${id}/rotate-secret`),
        await later.request("PUT", `${endpoints}/${id}/format`, { body: { format: "legacy" } }),
        await later.request("POST", `${endpoints}/${id}/disable`),
        await later.request("POST", `${endpoints}/${id}/enable`),
        await later.request("POST", `${endpoints}/${legacy.id}/rotate-secret`),
        await later.request("GET", `${endpoints}/${id}`),
      ];
      for (const res of answers) expect({ status: res.status, apiVersion: res.body.apiVersion }).toEqual({ status: 200, apiVersion: CURRENT_API_VERSION });
      expect((await row(id)).apiVersion).toBe(CURRENT_API_VERSION);
      expect((await row(legacy.id)).apiVersion).toBe(CURRENT_API_VERSION);
      // Only endpoints created by the later release get its version.
      expect((await createEndpoint(later, endpoints)).apiVersion).toBe("2027-06-01");
      expect((await later.request("POST", `${endpoints}/import-legacy`, { body: { url: "https://hooks.example.com/" } })).body.apiVersion).toBe("2027-06-01");
    } finally {
      await later.close();
    }
  });
});

describe("robustness", () => {
  it("never answers 500 to bad input", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    const bodies = [
      "[]",
      '"text"',
      "null",
      "{",
      '{"url": {"a": 1}, "subscriptions": ["auth"]}',
      '{"url": ["https://hooks.example.com/"], "subscriptions": ["auth"]}',
      '{"url": "https://hooks.example.com/", "subscriptions": [["auth"]]}',
      '{"url": "https://hooks.example.com/", "subscriptions": [null]}',
      '{"url": "https://exa\\u0000mple.com/", "subscriptions": ["auth"]}',
      '{"url": "https://[::1", "subscriptions": ["auth"]}',
      '{"url": "https://bücher.example/", "subscriptions": ["auth"]}',
      '{"url": "https://%00/", "subscriptions": ["auth"]}',
      '{"url": "https://hooks.example.com:99999/", "subscriptions": ["auth"]}',
      '{"url": "javascript:alert(1)", "subscriptions": ["auth"]}',
      `{"url": "https://${"a".repeat(300)}.com/", "subscriptions": ["auth"]}`,
      '{"format": null}',
      '{"__proto__": {"format": "legacy"}, "format": "legacy"}',
    ];
    const targets: Array<[string, string]> = [
      ["POST", endpoints],
      ["PATCH", `${endpoints}/${id}`],
      ["PUT", `${endpoints}/${id}/format`],
      ["POST", `${endpoints}/import-legacy`],
    ];
    for (const [method, path] of targets) {
      for (const rawBody of bodies) {
        const res = await api.request(method, path, { rawBody, headers: { "content-type": "application/json" } });
        expect({ method, path, rawBody, status: res.status < 500 }).toEqual({ method, path, rawBody, status: true });
      }
    }
    // (No "%2e%2e": fetch itself resolves it as "..", so the request would not reach this route.)
    const actions = [["GET", ""], ["PATCH", ""], ["DELETE", ""], ["POST", "/disable"], ["POST", "/rotate-secret"]] as const;
    for (const weird of ["%2F", "..%2F", "a".repeat(500), "3F1C9A5E-8A0B-4C55-9C61-5D2B8F0E7A11", "00000000-0000-0000-0000-000000000000"]) {
      for (const [method, suffix] of actions) {
        const res = await api.request(method, `${endpoints}/${weird}${suffix}`, method === "PATCH" ? { body: {} } : {});
        expect(res.status).toBe(404);
      }
    }
    // A NUL is not platform text: refused before any lookup, naming the path segment.
    for (const [method, suffix] of actions) {
      const res = await api.request(method, `${endpoints}/a%00b${suffix}`, method === "PATCH" ? { body: {} } : {});
      expect({ status: res.status, type: res.body.type, parameter: res.body.parameter }).toEqual({
        status: 400,
        type: "/problems/invalid-path",
        parameter: "path segment 7",
      });
    }
    expect(api.logs.filter((l) => l.level === "error")).toEqual([]);
  });

  it("never logs a secret, plain or sealed", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const created = await createEndpoint(api, endpoints);
    const rotated = (await api.request("POST", `${endpoints}/${created.id}/rotate-secret`)).body;
    await api.request("POST", endpoints, { body: { url: "http://hooks.example.com/", subscriptions: ["auth"] } });
    await api.request("PUT", `${endpoints}/${created.id}/format`, { body: { format: "nope" } });
    const sealed = (await row(created.id)).secretSealed!;
    const logged = JSON.stringify(api.logs);
    expect(api.logs.length).toBeGreaterThan(0);
    for (const s of [created.secret, rotated.secret, sealed]) expect(logged).not.toContain(s);
  });
});
