import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Validator } from "@seriousme/openapi-schema-validator";
import type { Logger } from "@vw/service-kit";
import { createPgPool } from "@vw/db";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents, generateSecretBoxKey } from "@vw/webhook-core";
import { compareRoutes, registeredRoutes } from "@vw/testing";
import { createIngestApp } from "../src/app.js";
import { AnalyticsIntake } from "../src/analytics.service.js";
import { ingestDatabase } from "../src/database.js";
import { AuthHookService } from "../src/auth-hook.service.js";
import { pseudonymKey } from "../src/analytics-privacy.js";
import { startIngest, type IngestHarness } from "./harness.js";

let h: IngestHarness;
beforeAll(async () => {
  h = await startIngest();
});
afterAll(async () => {
  await h.close();
});

const silent = (() => {
  const noop = (): void => undefined;
  const l = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, fatal: noop, child: () => l };
  return l as unknown as Logger;
})();

describe("GET /openapi.json", () => {
  it("is served without a token: a valid OpenAPI 3.1 document", async () => {
    const res = await h.request("GET", "/openapi.json", { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const result = await new Validator().validate(res.body);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
  });

  it("describes every route of the full app (events, analytics, auth hook), and only those", async () => {
    const { body } = await h.request("GET", "/openapi.json", { token: null });
    const pool = createPgPool(process.env.DATABASE_URL!, { max: 1 });
    const agents = createDeliveryAgents("any");
    try {
      const app = createIngestApp({
        db: h.db,
        redis: h.redis,
        queue: h.queue,
        logger: silent,
        ingestToken: h.token,
        playUrl: "https://play.example.test",
        redisKeyPrefix: h.keyPrefix,
        analytics: new AnalyticsIntake(h.db, h.redis, silent, {
          keyPrefix: h.keyPrefix,
          pseudonymKey: pseudonymKey(null, generateSecretBoxKey()),
          bufferMax: 10,
        }),
        authHook: new AuthHookService(ingestDatabase(pool), {
          playUrl: "https://play.example.test",
          secretBox: createSecretBox(generateSecretBoxKey()),
          agents,
          timeoutMs: 1000,
          logger: silent,
        }),
      });
      const routes = registeredRoutes(app);
      expect(routes.map((r) => r.path)).toEqual(expect.arrayContaining(["/v1/events", "/v1/analytics", "/v1/auth-hook"]));
      expect(compareRoutes(routes, body)).toEqual({ undocumented: [], unregistered: [] });
    } finally {
      destroyDeliveryAgents(agents);
      await pool.end();
    }
  });

  it("requires the ingest token on every /v1 operation", async () => {
    const { body } = await h.request("GET", "/openapi.json", { token: null });
    for (const [path, item] of Object.entries(body.paths as Record<string, Record<string, { security: unknown[] }>>)) {
      for (const op of Object.values(item)) {
        expect({ path, security: op.security }).toEqual({ path, security: path.startsWith("/v1/") ? [{ ingestToken: [] }] : [] });
      }
    }
  });
});
