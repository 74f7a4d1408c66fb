import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { AddressInfo } from "node:net";
import { createPgPool } from "@vw/db";
import { closeServer, listen, type Logger } from "@vw/service-kit";
import { createIngestApp } from "../src/app.js";
import { startIngest, type IngestHarness } from "./harness.js";

let api: IngestHarness;

beforeAll(async () => {
  api = await startIngest({ bodyLimit: 2048 });
});

afterAll(async () => {
  await api?.close();
});

describe("authentication", () => {
  it("refuses a request without a token with 401 and WWW-Authenticate", async () => {
    const res = await api.post({}, { token: null });
    expect(res.status).toBe(401);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="event-ingest"');
    expect(res.body).toMatchObject({ type: "/problems/missing-token", status: 401 });
  });

  it("refuses a wrong token with 401 invalid_token and never logs it", async () => {
    const wrong = `${api.token}x`;
    const res = await api.post({}, { token: wrong });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="event-ingest", error="invalid_token"');
    expect(res.body).toMatchObject({ type: "/problems/invalid-token" });
    expect(JSON.stringify(api.logs)).not.toContain(wrong);
  });

  it("refuses a malformed Authorization header", async () => {
    const res = await api.request("POST", "/v1/events", { token: null, headers: { authorization: `Basic ${api.token}` }, body: {} });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain('error="invalid_request"');
  });

  it("checks the token before anything else under /v1, unknown routes included", async () => {
    expect((await api.request("GET", "/v1/nothing", { token: null })).status).toBe(401);
    expect((await api.request("GET", "/v1/nothing")).status).toBe(404);
  });
});

describe("HTTP surface", () => {
  it("answers /healthz and /readyz with the database and Redis checked", async () => {
    expect((await api.request("GET", "/healthz", { token: null })).body).toEqual({ status: "ok" });
    const ready = await api.request("GET", "/readyz", { token: null });
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: "ready", checks: [{ name: "database", ok: true }, { name: "redis", ok: true }] });
  });

  it("answers 405 with Allow for another method on /v1/events", async () => {
    const res = await api.request("GET", "/v1/events");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });

  it("refuses a missing body, malformed JSON, another media type and an oversized body", async () => {
    const missing = await api.request("POST", "/v1/events");
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toEqual([{ pointer: "", detail: "is required" }]);

    const malformed = await api.request("POST", "/v1/events", { rawBody: "{", headers: { "content-type": "application/json" } });
    expect(malformed.status).toBe(400);
    expect(malformed.body.type).toBe("/problems/malformed-json");

    const text = await api.request("POST", "/v1/events", { rawBody: "id=1", headers: { "content-type": "text/plain" } });
    expect(text.status).toBe(415);

    const big = await api.post({ events: [{ id: "x".repeat(4096) }] });
    expect(big.status).toBe(413);
    expect(big.body.type).toBe("/problems/payload-too-large");
  });

  it("answers unknown routes with a 404 problem", async () => {
    const res = await api.request("GET", "/nowhere", { token: null });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  });
});

describe("readiness without Redis", () => {
  it("reports redis unavailable with 503 when its connection is gone", async () => {
    const down = await startIngest({ keyPrefix: api.keyPrefix });
    try {
      await down.queue.waitUntilReady();
      down.redis.disconnect();
      const res = await down.request("GET", "/readyz", { token: null });
      expect(res.status).toBe(503);
      expect(res.body.checks).toEqual([{ name: "database", ok: true }, { name: "redis", ok: false }]);
    } finally {
      await down.close();
    }
  });
});

describe("intake without its database", () => {
  it("answers 503 dependency-unavailable (a problem document, not a 500) when the intake pool cannot connect", async () => {
    const world = await api.createWorld();
    // Same app, but the intake's pool points at a port where nothing listens.
    const pool = createPgPool("postgresql://postgres@127.0.0.1:1/none", { max: 1 });
    const logs: unknown[] = [];
    const silent = (() => {
      const noop = (): void => undefined;
      // The request line: a warning (the outage itself is the dependency status's one error line).
      const l = { trace: noop, debug: noop, info: noop, warn: (f: unknown) => void logs.push(f), error: (f: unknown) => void logs.push(f), fatal: noop, child: () => l };
      return l as unknown as Logger;
    })();
    const app = createIngestApp({ pool, redis: api.redis, queue: api.queue, logger: silent, ingestToken: api.token, playUrl: "https://play.example.test", redisKeyPrefix: api.keyPrefix });
    const server = await listen(app, 0, "127.0.0.1");
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${api.token}`, "content-type": "application/json" },
        body: JSON.stringify({ id: "evt-db-down", world: world.ref, type: "visitor.registered", timestamp: new Date().toISOString(), data: { uuid: "u-1", name: "N", email: "n@example.test", via: "email" } }),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(res.headers.get("retry-after")).toBe("2");
      expect(await res.json()).toMatchObject({ type: "/problems/dependency-unavailable", status: 503 });
      expect(JSON.stringify(logs)).toContain("dependency-unavailable");
    } finally {
      await closeServer(server);
      await pool.end();
    }
  });
});
