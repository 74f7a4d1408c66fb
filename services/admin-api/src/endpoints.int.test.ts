import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { CURRENT_API_VERSION } from "@vw/contracts";
import { parseSecret } from "@vw/webhook-core";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { createEndpoint, expectEndpointShape, expectProblem, fakeDns, rawRow, worldWithEndpoints } from "../test/endpoint-fixtures.js";

const dns = fakeDns();
let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi({ resolveHost: dns.resolve });
});
afterAll(async () => {
  await api.close();
});

const ENDPOINT_KEYS = ["apiVersion", "createdAt", "disabledAt", "disabledReason", "enabled", "format", "hasSecret", "headerNames", "id", "rateLimitPerSecond", "subscriptions", "updatedAt", "url"];

describe("POST .../endpoints", () => {
  it("creates an enabled current endpoint: 201, Location, no-store, the secret once, apiVersion frozen to the current one", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const res = await api.request("POST", endpoints, { body: { url: "https://hooks.example.com/webhooks?src=vw", subscriptions: ["auth", "recording"] } });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("location")).toBe(`${endpoints}/${res.body.id}`);
    expectEndpointShape(res.body, true);
    expect(res.body).toEqual({
      id: expect.any(String),
      url: "https://hooks.example.com/webhooks?src=vw",
      // Stored and shown in canonical order, whatever the order sent.
      subscriptions: ["recording", "auth"],
      enabled: true,
      format: "current",
      apiVersion: CURRENT_API_VERSION,
      hasSecret: true,
      disabledReason: null,
      disabledAt: null,
      rateLimitPerSecond: null,
      headerNames: [],
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+={0,2}$/),
    });
    expect(CURRENT_API_VERSION).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const key = Buffer.from(res.body.secret.slice("whsec_".length), "base64");
    expect(key.length).toBeGreaterThanOrEqual(24);
    expect(key.length).toBeLessThanOrEqual(64);
    expect(parseSecret(res.body.secret)).toEqual(key);
    expect(dns.asked).toContain("hooks.example.com");
  });

  it("stores the secret sealed: no column holds it, and the box opens the stored value to it", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id, secret } = await createEndpoint(api, endpoints);
    const raw = await rawRow(api, id);
    expect(raw).not.toContain(secret);
    expect(raw).not.toContain(secret.slice("whsec_".length));
    expect(raw).not.toContain(Buffer.from(secret.slice("whsec_".length), "base64").toString("base64url"));
    const row = await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } });
    expect(row.secretSealed).not.toBeNull();
    expect(api.secretBox.open(row.secretSealed!)).toBe(secret);
    expect(row).toMatchObject({ secretVersion: 0, secretRotatedAt: null, consecutiveFailures: 0, apiVersion: CURRENT_API_VERSION });
  });

  it("gives every endpoint its own secret", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const secrets = await Promise.all([1, 2, 3].map(async () => (await createEndpoint(api, endpoints)).secret));
    expect(new Set(secrets).size).toBe(3);
  });

  it("refuses invalid bodies with a pointer per member and stores nothing", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const cases: Array<[unknown, Array<{ pointer: string; detail: unknown }>]> = [
      [{}, [{ pointer: "/url", detail: "is required" }, { pointer: "/subscriptions", detail: "is required" }]],
      [{ url: "https://hooks.example.com/", subscriptions: [] }, [{ pointer: "/subscriptions", detail: "must have at least 1 items" }]],
      [
        { url: "https://hooks.example.com/", subscriptions: ["recording", "billing"] },
        [{ pointer: "/subscriptions/1", detail: "must be one of: recording, visitor, consent, analytics, auth" }],
      ],
      [
        { url: "https://hooks.example.com/", subscriptions: ["auth", "auth"] },
        [{ pointer: "/subscriptions", detail: expect.stringContaining("must not contain duplicate items") }],
      ],
      [{ url: "https://hooks.example.com/", subscriptions: "auth" }, [{ pointer: "/subscriptions", detail: "must be array" }]],
      [{ url: 42, subscriptions: ["auth"] }, [{ pointer: "/url", detail: "must be string" }]],
      [{ url: "", subscriptions: ["auth"] }, [{ pointer: "/url", detail: "must be at least 1 characters long" }]],
      [{ url: `https://hooks.example.com/${"a".repeat(2048)}`, subscriptions: ["auth"] }, [{ pointer: "/url", detail: "must be at most 2048 characters long" }]],
      [{ url: "https://hooks.example.com/", subscriptions: ["auth"], secret: "whsec_mine" }, [{ pointer: "/secret", detail: "is not allowed" }]],
      [{ url: "https://hooks.example.com/", subscriptions: ["auth"], apiVersion: "2020-01-01" }, [{ pointer: "/apiVersion", detail: "is not allowed" }]],
      // Schema and URL policy problems come in one answer.
      [
        { url: "http://hooks.example.com/", subscriptions: ["nope"] },
        [
          { pointer: "/subscriptions/0", detail: expect.stringMatching(/^must be one of/) },
          { pointer: "/url", detail: "is refused by ENDPOINT_URL_POLICY=public-https: the URL must use https" },
        ],
      ],
    ];
    for (const [body, errors] of cases) {
      const res = await api.request("POST", endpoints, { body });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors).toHaveLength(errors.length);
      expect(res.body.errors).toEqual(expect.arrayContaining(errors));
    }
    const noBody = await api.request("POST", endpoints);
    expectProblem(noBody, 400, "invalid-request");
    expect(noBody.body.errors).toEqual([{ pointer: "", detail: "must be object" }]);
    expect((await api.request("GET", endpoints)).body.items).toEqual([]);
  });

  it("answers 404 for an unknown world or organization (after validating the body)", async () => {
    const { org } = await worldWithEndpoints(api);
    const body = { url: "https://hooks.example.com/", subscriptions: ["auth"] };
    expectProblem(await api.request("POST", `/admin/v1/worlds/${org}/nope/endpoints`, { body }), 404, "not-found");
    expectProblem(await api.request("POST", `/admin/v1/worlds/${api.slug("ghost")}/main/endpoints`, { body }), 404, "not-found");
  });
});

describe("ENDPOINT_URL_POLICY=public-https (the default)", () => {
  const refused: Array<[string, RegExp]> = [
    ["http://hooks.example.com/", /must use https/],
    ["https://127.0.0.1/", /loopback/],
    ["https://localhost/", /localhost/],
    ["https://localhost./hook", /localhost/],
    ["https://api.localhost/", /localhost/],
    ["https://10.0.0.1/", /private/],
    ["https://172.16.5.4/", /private/],
    ["https://192.168.0.10/", /private/],
    ["https://169.254.169.254/latest/meta-data", /link-local/],
    ["https://100.64.0.1/", /carrier-grade/],
    ["https://[::1]/", /loopback/],
    ["https://[fd00::1]/", /unique-local/],
    ["https://[::ffff:127.0.0.1]/", /127\.0\.0\.1|ipv4-mapped|IPv4-mapped/],
    ["https://2130706433/", /loopback/],
    ["https://0177.0.0.1/", /loopback/],
    ["https://0x7f.1/", /loopback/],
    // Names: one answer whatever DNS said (no oracle of internal names); the detail is logged only.
    ["https://internal.example.com/hook", /: internal\.example\.com is not a public address$/],
    ["https://rebind.example.com/hook", /: rebind\.example\.com is not a public address$/],
    ["https://ula.example.com/hook", /: ula\.example\.com is not a public address$/],
    ["https://loopback.example.com/hook", /: loopback\.example\.com is not a public address$/],
    ["https://unknown.example.com/hook", /: unknown\.example\.com is not a public address$/],
    ["https://user:pass@hooks.example.com/", /user name or password/],
    ["not a url", /not a valid absolute URL/],
    ["/relative/path", /not a valid absolute URL/],
    ["ftp://hooks.example.com/", /must use https/],
  ];

  it.each(refused)("refuses %s at creation with a pointer to /url and the reason", async (url, reason) => {
    const { endpoints } = await worldWithEndpoints(api);
    const res = await api.request("POST", endpoints, { body: { url, subscriptions: ["auth"] } });
    expectProblem(res, 400, "invalid-request");
    expect(res.body.errors).toEqual([{ pointer: "/url", detail: expect.stringMatching(/^is refused by ENDPOINT_URL_POLICY=public-https: /) }]);
    expect(res.body.errors[0].detail).toMatch(reason);
    expect(await api.prisma.webhookEndpoint.count({ where: { world: { organization: { slug: endpoints.split("/")[4]! } } } })).toBe(0);
  });

  it("refuses them on import-legacy too", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    for (const url of ["http://hooks.example.com/", "https://10.0.0.1/", "https://internal.example.com/"]) {
      const res = await api.request("POST", `${endpoints}/import-legacy`, { body: { url } });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors).toEqual([{ pointer: "/url", detail: expect.stringContaining("ENDPOINT_URL_POLICY=public-https") }]);
    }
    expect((await api.request("GET", endpoints)).body.items).toEqual([]);
  });

  it("accepts https to a name resolving only to public addresses, and a public IP literal, normalising the URL", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const named = await createEndpoint(api, endpoints, { url: "HTTPS://Other-Hooks.Example.COM:443/In", subscriptions: ["visitor"] });
    expect(named.url).toBe("https://other-hooks.example.com/In");
    expect(dns.asked).toContain("other-hooks.example.com");
    const literal = await createEndpoint(api, endpoints, { url: "https://93.184.215.14:8443/hook", subscriptions: ["consent"] });
    expect(literal.url).toBe("https://93.184.215.14:8443/hook");
  });
});

describe("ENDPOINT_URL_POLICY=any", () => {
  let anyApi: AdminApiHarness;
  let receiver: Server;
  beforeAll(async () => {
    anyApi = await startAdminApi({ endpointUrlPolicy: "any" });
    receiver = createServer((_req, res) => res.end());
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => receiver.close(resolve));
    await anyApi.close();
  });

  it("accepts a plain-http loopback receiver", async () => {
    const { endpoints } = await worldWithEndpoints(anyApi);
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const created = await createEndpoint(anyApi, endpoints, { url, subscriptions: ["auth"] });
    expect(created.url).toBe(url);
    const legacy = await anyApi.request("POST", `${endpoints}/import-legacy`, { body: { url } });
    expect(legacy.status).toBe(201);
  });

  it("still refuses what is not an http(s) URL", async () => {
    const { endpoints } = await worldWithEndpoints(anyApi);
    for (const url of ["ftp://127.0.0.1/", "file:///etc/passwd", "not a url"]) {
      const res = await anyApi.request("POST", endpoints, { body: { url, subscriptions: ["auth"] } });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors).toEqual([{ pointer: "/url", detail: expect.stringMatching(/^is refused by ENDPOINT_URL_POLICY=any: /) }]);
    }
  });

  it("is logged loudly at start-up; the default policy is not", () => {
    const warnings = (h: AdminApiHarness) => h.logs.filter((l) => l.level === "warn" && String(l.msg).includes("ENDPOINT_URL_POLICY=any"));
    expect(warnings(anyApi)).toHaveLength(1);
    expect(warnings(api)).toHaveLength(0);
  });
});

describe("GET .../endpoints and .../endpoints/{id}", () => {
  it("lists the world's endpoints newest first, never with a secret, sealed or not", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const created = [];
    for (const path of ["a", "b", "c"]) created.push(await createEndpoint(api, endpoints, { url: `https://hooks.example.com/${path}`, subscriptions: ["auth"] }));
    await worldWithEndpoints(api).then(({ endpoints: other }) => createEndpoint(api, other));

    const res = await api.request("GET", endpoints);
    expect(res.status).toBe(200);
    expect(res.body.nextCursor).toBeNull();
    expect(res.body.items.map((e: { url: string }) => e.url)).toEqual(["c", "b", "a"].map((p) => `https://hooks.example.com/${p}`));
    for (const item of res.body.items) {
      expect(Object.keys(item).sort()).toEqual(ENDPOINT_KEYS);
      expectEndpointShape(item);
    }
    for (const { id, secret } of created) {
      expect(res.text).not.toContain(secret);
      const row = await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } });
      expect(res.text).not.toContain(row.secretSealed!);
    }
  });

  it("pages with a cursor", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    for (const path of ["e1", "e2", "e3"]) await createEndpoint(api, endpoints, { url: `https://hooks.example.com/${path}`, subscriptions: ["auth"] });
    const first = await api.request("GET", `${endpoints}?limit=2`);
    expect(first.body.items.map((e: { url: string }) => e.url.split("/").pop())).toEqual(["e3", "e2"]);
    const second = await api.request("GET", `${endpoints}?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.items.map((e: { url: string }) => e.url.split("/").pop())).toEqual(["e1"]);
    expect(second.body.nextCursor).toBeNull();
    for (const query of ["limit=0", "limit=101", "cursor=nope", `cursor=${first.body.items[0].id}`]) {
      expectProblem(await api.request("GET", `${endpoints}?${query}`), 400, "invalid-parameter");
    }
  });

  it("keeps paging when the endpoint that ended the previous page is deleted meanwhile", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    for (const path of ["e1", "e2", "e3", "e4", "e5"]) await createEndpoint(api, endpoints, { url: `https://hooks.example.com/${path}`, subscriptions: ["auth"] });
    const first = await api.request("GET", `${endpoints}?limit=2`);
    expect(first.body.items.map((e: { url: string }) => e.url.split("/").pop())).toEqual(["e5", "e4"]);
    expect((await api.request("DELETE", `${endpoints}/${first.body.items[1].id}`)).status).toBe(204);
    const second = await api.request("GET", `${endpoints}?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.items.map((e: { url: string }) => e.url.split("/").pop())).toEqual(["e3", "e2"]);
  });

  it("reads one endpoint without its secret; another world's, a malformed or an unknown id is 404", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { endpoints: other } = await worldWithEndpoints(api);
    const { secret, ...endpoint } = await createEndpoint(api, endpoints);
    const res = await api.request("GET", `${endpoints}/${endpoint.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(endpoint);
    expect(res.text).not.toContain(secret);
    for (const path of [`${other}/${endpoint.id}`, `${endpoints}/not-a-uuid`, `${endpoints}/3f1c9a5e-8a0b-4c55-9c61-5d2b8f0e7a11`]) {
      expectProblem(await api.request("GET", path), 404, "not-found");
    }
    expectProblem(await api.request("GET", `/admin/v1/worlds/${api.slug("ghost")}/main/endpoints`), 404);
  });
});

describe("PATCH .../endpoints/{id}", () => {
  it("replaces url and subscriptions; apiVersion, secret, format and state stay", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { secret, ...created } = await createEndpoint(api, endpoints, { url: "https://hooks.example.com/v1", subscriptions: ["recording"] });
    const res = await api.request("PATCH", `${endpoints}/${created.id}`, {
      body: { url: "https://other-hooks.example.com/v2", subscriptions: ["analytics", "visitor"] },
    });
    expect(res.status).toBe(200);
    expectEndpointShape(res.body);
    expect(res.body).toEqual({
      ...created,
      url: "https://other-hooks.example.com/v2",
      subscriptions: ["visitor", "analytics"],
      updatedAt: expect.any(String),
    });
    expect(res.text).not.toContain(secret);
    const row = await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: created.id } });
    expect(api.secretBox.open(row.secretSealed!)).toBe(secret);
    expect(row.apiVersion).toBe(CURRENT_API_VERSION);

    const onlySubscriptions = await api.request("PATCH", `${endpoints}/${created.id}`, { body: { subscriptions: ["auth"] } });
    expect(onlySubscriptions.body).toMatchObject({ url: "https://other-hooks.example.com/v2", subscriptions: ["auth"] });
    const nothing = await api.request("PATCH", `${endpoints}/${created.id}`, { body: {} });
    expect(nothing.status).toBe(200);
    expect(nothing.body).toEqual(onlySubscriptions.body);
  });

  it("checks a new url against the policy and keeps the old one when refused", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const created = await createEndpoint(api, endpoints);
    for (const url of ["http://hooks.example.com/", "https://192.168.1.1/", "https://internal.example.com/", "https://2130706433/"]) {
      const res = await api.request("PATCH", `${endpoints}/${created.id}`, { body: { url, subscriptions: ["auth"] } });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors).toEqual([{ pointer: "/url", detail: expect.stringContaining("ENDPOINT_URL_POLICY=public-https") }]);
    }
    const row = await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: created.id } });
    expect({ url: row.url, subscriptions: row.subscriptions }).toEqual({ url: created.url, subscriptions: created.subscriptions });
  });

  it("refuses what is not editable here and bad values, with pointers", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    const cases: Array<[unknown, string]> = [
      [{ apiVersion: "2030-01-01" }, "/apiVersion"],
      [{ format: "legacy" }, "/format"],
      [{ enabled: false }, "/enabled"],
      [{ secret: "whsec_x" }, "/secret"],
      [{ subscriptions: [] }, "/subscriptions"],
      [{ subscriptions: ["auth", "nope"] }, "/subscriptions/1"],
      [{ url: null }, "/url"],
    ];
    for (const [body, pointer] of cases) {
      const res = await api.request("PATCH", `${endpoints}/${id}`, { body });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual([pointer]);
    }
    expect((await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } })).apiVersion).toBe(CURRENT_API_VERSION);
  });

  it("sets, changes and removes the throttle (rateLimitPerSecond), shown by GET; refuses anything but an integer >= 1 or null", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const created = await api.request("POST", endpoints, { body: { url: "https://hooks.example.com/t", subscriptions: ["auth"], rateLimitPerSecond: 5 } });
    expect(created.status).toBe(201);
    expect(created.body.rateLimitPerSecond).toBe(5);
    const id = created.body.id as string;
    const set = await api.request("PATCH", `${endpoints}/${id}`, { body: { rateLimitPerSecond: 20 } });
    expect(set.status).toBe(200);
    expectEndpointShape(set.body);
    expect(set.body).toMatchObject({ rateLimitPerSecond: 20, url: "https://hooks.example.com/t", subscriptions: ["auth"] });
    expect((await api.request("GET", `${endpoints}/${id}`)).body.rateLimitPerSecond).toBe(20);
    // Another member alone leaves it as it is.
    expect((await api.request("PATCH", `${endpoints}/${id}`, { body: { subscriptions: ["visitor"] } })).body.rateLimitPerSecond).toBe(20);
    for (const bad of [0, -1, 1.5, "10", true, 100_001]) {
      const res = await api.request("PATCH", `${endpoints}/${id}`, { body: { rateLimitPerSecond: bad } });
      expectProblem(res, 400, "invalid-request");
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(["/rateLimitPerSecond"]);
    }
    const refusedCreate = await api.request("POST", endpoints, { body: { url: "https://hooks.example.com/u", subscriptions: ["auth"], rateLimitPerSecond: 0 } });
    expectProblem(refusedCreate, 400, "invalid-request");
    expect((await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } })).rateLimitPerSecond).toBe(20);
    const removed = await api.request("PATCH", `${endpoints}/${id}`, { body: { rateLimitPerSecond: null } });
    expect(removed.body.rateLimitPerSecond).toBeNull();
    expect((await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } })).rateLimitPerSecond).toBeNull();
  });

  it("answers 404 for an endpoint of another world, which stays unchanged", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { endpoints: other } = await worldWithEndpoints(api);
    const foreign = await createEndpoint(api, other);
    expectProblem(await api.request("PATCH", `${endpoints}/${foreign.id}`, { body: { subscriptions: ["auth"] } }), 404);
    expect((await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: foreign.id } })).subscriptions).toEqual(["recording"]);
  });
});

describe("DELETE .../endpoints/{id}", () => {
  it("deletes: 204, then 404 on read and on a second delete", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const gone = await createEndpoint(api, endpoints);
    const kept = await createEndpoint(api, endpoints);
    const res = await api.request("DELETE", `${endpoints}/${gone.id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect(await api.prisma.webhookEndpoint.findUnique({ where: { id: gone.id } })).toBeNull();
    expectProblem(await api.request("GET", `${endpoints}/${gone.id}`), 404);
    expectProblem(await api.request("DELETE", `${endpoints}/${gone.id}`), 404);
    expect((await api.request("GET", endpoints)).body.items.map((e: { id: string }) => e.id)).toEqual([kept.id]);
  });

  it("answers 404 for another world's endpoint, which is kept", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    const { endpoints: other } = await worldWithEndpoints(api);
    const foreign = await createEndpoint(api, other);
    expectProblem(await api.request("DELETE", `${endpoints}/${foreign.id}`), 404);
    expectProblem(await api.request("DELETE", `${endpoints}/not-a-uuid`), 404);
    expect(await api.prisma.webhookEndpoint.findUnique({ where: { id: foreign.id } })).not.toBeNull();
  });

  it("goes with its world (foreign key cascade)", async () => {
    const { org, endpoints } = await worldWithEndpoints(api);
    const { id } = await createEndpoint(api, endpoints);
    await api.prisma.world.deleteMany({ where: { organization: { slug: org } } });
    expect(await api.prisma.webhookEndpoint.findUnique({ where: { id } })).toBeNull();
  });
});
