import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { AddressInfo } from "node:net";
import { createPrismaClient, type PrismaClient } from "@vw/db";
import { createRedisConnection, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { closeServer, listen, type Logger } from "@vw/service-kit";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents, generateSecretBoxKey } from "@vw/webhook-core";
import type { Queue } from "bullmq";
import { conformance } from "../test/conformance.js";
import { createAdminApp } from "./app.js";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi();
});
afterAll(async () => {
  await api.close();
});

function expectProblem(res: { status: number; headers: Headers; body: any }, status: number, type?: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  expect(res.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String) });
  if (type) expect(res.body.type).toBe(`/problems/${type}`);
}

describe("authentication", () => {
  it("answers 401 with WWW-Authenticate: Bearer when the Authorization header is missing", async () => {
    const res = await api.request("GET", "/admin/v1/organizations", { token: null });
    expectProblem(res, 401, "missing-token");
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="admin-api"');
  });

  it("answers 401 with error=invalid_token for a wrong token", async () => {
    const res = await api.request("GET", "/admin/v1/organizations", { token: `${api.adminToken}x` });
    expectProblem(res, 401, "invalid-token");
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="admin-api", error="invalid_token"');
  });

  it("refuses a prefix of the token, an empty token and another scheme", async () => {
    for (const authorization of [`Bearer ${api.adminToken.slice(0, -1)}`, "Bearer ", `Basic ${api.adminToken}`, api.adminToken]) {
      const res = await api.request("GET", "/admin/v1/organizations", { token: null, headers: { authorization } });
      expectProblem(res, 401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer realm="admin-api"/);
    }
  });

  it("protects writes and unknown admin paths too, before looking at the body", async () => {
    const slug = api.slug("unauth");
    const post = await api.request("POST", "/admin/v1/organizations", { token: null, body: { slug, name: "Nope" } });
    expectProblem(post, 401);
    expect(await api.prisma.organization.count({ where: { slug } })).toBe(0);
    expectProblem(await api.request("GET", "/admin/v1/nothing-here", { token: "wrong-token-0000000" }), 401);
  });

  it("accepts the token with a case-insensitive scheme", async () => {
    const res = await api.request("GET", "/admin/v1/organizations", { token: null, headers: { authorization: `bearer ${api.adminToken}` } });
    expect(res.status).toBe(200);
  });

  it("never logs the presented or the real token", async () => {
    await api.request("GET", "/admin/v1/organizations", { token: "a-wrong-token-to-look-for" });
    await api.request("POST", "/admin/v1/organizations", { body: { slug: "NOT VALID", name: "x" } });
    const logged = JSON.stringify(api.logs);
    expect(api.logs.length).toBeGreaterThan(0);
    expect(logged).not.toContain("a-wrong-token-to-look-for");
    expect(logged).not.toContain(api.adminToken);
  });
});

describe("health", () => {
  it("answers /healthz and /readyz without a token", async () => {
    const health = await api.request("GET", "/healthz", { token: null });
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: "ok" });
    const ready = await api.request("GET", "/readyz", { token: null });
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({
      status: "ready",
      checks: [
        { name: "database", ok: true },
        { name: "redis", ok: true },
      ],
    });
  });

  /** Serves an app built on the given database and queue; returns its /readyz and /healthz answers. */
  async function probe(prisma: PrismaClient, deliveryQueue: DeliveryQueues) {
    const silent = { debug() {}, info() {}, warn() {}, error() {} } as unknown as Logger;
    const deliveryAgents = createDeliveryAgents("public-https");
    const app = createAdminApp({
      prisma,
      logger: silent,
      adminToken: "x".repeat(16),
      publicMapStorageUrl: "http://m",
      playUrl: "http://p",
      secretBox: createSecretBox(generateSecretBoxKey()),
      endpointUrlPolicy: "public-https",
      deliveryQueue,
      recoveryQueue: deliveryQueue.shards[0] as Queue,
      deliveryAgents,
      deliveryTimeoutMs: 1000,
    });
    const server = await listen(app, 0, "127.0.0.1");
    conformance.attach(server);
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const ready = await fetch(`${base}/readyz`);
      return { ready: { status: ready.status, body: await ready.json() }, health: (await fetch(`${base}/healthz`)).status };
    } finally {
      await closeServer(server);
      destroyDeliveryAgents(deliveryAgents);
    }
  }

  it("answers /readyz 503 when the database is unreachable, /healthz still 200", async () => {
    const prisma = createPrismaClient("postgresql://postgres@127.0.0.1:1/unreachable", { max: 1 });
    try {
      const { ready, health } = await probe(prisma, api.deliveryQueue);
      expect(ready).toEqual({
        status: 503,
        body: {
          status: "unavailable",
          checks: [
            { name: "database", ok: false },
            { name: "redis", ok: true },
          ],
        },
      });
      expect(health).toBe(200);
    } finally {
      await prisma.$disconnect();
    }
  });

  it("answers /readyz 503 when Redis is gone, /healthz still 200", async () => {
    // A queue whose connection is lost: what the producer connection sees while Redis is down.
    const redis = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "producer");
    redis.on("error", () => {});
    const queue = openDeliveryQueues(redis, `${api.redisKeyPrefix}-gone`);
    await queue.waitUntilReady();
    redis.disconnect();
    try {
      const { ready, health } = await probe(api.prisma, queue);
      expect(ready).toEqual({
        status: 503,
        body: {
          status: "unavailable",
          checks: [
            { name: "database", ok: true },
            { name: "redis", ok: false },
          ],
        },
      });
      expect(health).toBe(200);
    } finally {
      await queue.close().catch(() => {});
    }
  });
});

describe("request errors", () => {
  it("answers 404 problems for unknown routes, inside and outside /admin/v1", async () => {
    expectProblem(await api.request("GET", "/nowhere", { token: null }), 404, "not-found");
    expectProblem(await api.request("GET", "/admin/v1/nowhere"), 404, "not-found");
    expectProblem(await api.request("GET", "/admin/v2/organizations"), 404, "not-found");
  });

  it("matches paths case-sensitively", async () => {
    expectProblem(await api.request("GET", "/admin/v1/Organizations"), 404);
  });

  it("answers 405 with Allow for a known path and an unsupported method", async () => {
    const res = await api.request("DELETE", "/admin/v1/organizations");
    expectProblem(res, 405, "method-not-allowed");
    expect(res.headers.get("allow")).toBe("GET, POST");
    const world = await api.request("PUT", "/admin/v1/worlds/a/b", { body: {} });
    expectProblem(world, 405);
    expect(world.headers.get("allow")).toBe("GET, PATCH");
  });

  it("answers 415 for a body that is not JSON, and leaves the database alone", async () => {
    const slug = api.slug("form");
    const res = await api.request("POST", "/admin/v1/organizations", {
      rawBody: `slug=${slug}&name=x`,
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expectProblem(res, 415, "unsupported-media-type");
    expect(await api.prisma.organization.count({ where: { slug } })).toBe(0);
  });

  it("answers 400 for malformed JSON", async () => {
    const res = await api.request("POST", "/admin/v1/organizations", { rawBody: '{"slug": ', headers: { "content-type": "application/json" } });
    expectProblem(res, 400, "malformed-json");
  });

  it("answers 400 for JSON that is not an object, pointing at the document root", async () => {
    const array = await api.request("POST", "/admin/v1/organizations", { rawBody: "[]", headers: { "content-type": "application/json" } });
    expectProblem(array, 400, "invalid-request");
    expect(array.body.errors).toEqual([{ pointer: "", detail: "must be object" }]);
    // A bare scalar is not a JSON text express accepts as a body (strict mode).
    for (const rawBody of ['"text"', "null", "42"]) {
      const res = await api.request("POST", "/admin/v1/organizations", { rawBody, headers: { "content-type": "application/json" } });
      expectProblem(res, 400);
    }
  });

  it("answers 413 for an oversized body", async () => {
    const res = await api.request("POST", "/admin/v1/organizations", { body: { slug: "x", name: "n".repeat(100_000) } });
    expectProblem(res, 413);
  });

  it("answers 400 for an invalid page size or cursor", async () => {
    for (const query of ["limit=0", "limit=101", "limit=abc", "cursor=not-a-cursor"]) {
      const res = await api.request("GET", `/admin/v1/organizations?${query}`);
      expectProblem(res, 400, "invalid-parameter");
    }
  });
});
