/**
 * Hostile input on every event-ingest route, on an app with every optional route
 * mounted (analytics and the auth hook, as main.ts does): generated malformed bodies, headers and
 * paths never get a 5xx or a bare error, are refused with a problem document, store and queue
 * nothing, and leave the app answering. `FUZZ_SEED` replays a run, `FUZZ_RUNS` resizes it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { createPgPool, type PgPool } from "@vw/db";
import { closeServer, listen, type Logger } from "@vw/service-kit";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents, generateSecretBoxKey } from "@vw/webhook-core";
import {
  arbitraryRequests,
  fc,
  fuzzRuns,
  fuzzSeed,
  fuzzNodeLevel,
  fuzzTarget,
  malformedRequests,
  registeredRoutes,
  unsafeText,
  type FuzzTarget,
} from "@vw/testing";
import { pseudonymKey } from "../src/analytics-privacy.js";
import { AnalyticsIntake } from "../src/analytics.service.js";
import { createIngestApp } from "../src/app.js";
import { ingestDatabase } from "../src/database.js";
import { AuthHookService } from "../src/auth-hook.service.js";
import { startIngest, type IngestHarness, type TestWorld } from "./harness.js";

let h: IngestHarness;
let server: Server;
let pool: PgPool;
let agents: ReturnType<typeof createDeliveryAgents>;
let target: FuzzTarget;
let world: TestWorld;
let endpointId: string;
const errors: unknown[] = [];

beforeAll(async () => {
  h = await startIngest();
  const logger = (() => {
    const noop = (): void => undefined;
    const l = { trace: noop, debug: noop, info: noop, warn: noop, error: (f: unknown) => void errors.push(f), fatal: noop, child: () => l };
    return l as unknown as Logger;
  })();
  pool = createPgPool(process.env.DATABASE_URL!, { max: 2 });
  agents = createDeliveryAgents("public-https");
  const app = createIngestApp({
    db: h.db,
    redis: h.redis,
    queue: h.queue,
    logger,
    ingestToken: h.token,
    playUrl: "https://play.example.test",
    redisKeyPrefix: h.keyPrefix,
    // The fuzz sends bad tokens on purpose; it must not be throttled into answering 429 to the good ones.
    authThrottle: { maxFailures: 100_000, windowMs: 60_000 },
    analytics: new AnalyticsIntake(h.db, h.redis, logger, {
      keyPrefix: h.keyPrefix,
      pseudonymKey: pseudonymKey(null, generateSecretBoxKey()),
      bufferMax: 1000,
    }),
    authHook: new AuthHookService(ingestDatabase(pool), { playUrl: "https://play.example.test", secretBox: createSecretBox(generateSecretBoxKey()), agents, timeoutMs: 1000, logger }),
  });
  server = await listen(app, 0, "127.0.0.1");
  world = await h.createWorld();
  endpointId = await h.createEndpoint(world, { subscriptions: ["analytics", "visitor"] });
  target = {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    routes: registeredRoutes(app),
    knownParams: { org: [world.organizationSlug], world: [world.slug], uuid: [randomUUID()] },
    authHeaders: { authorization: `Bearer ${h.token}` },
  };
});
afterAll(async () => {
  await closeServer(server);
  const keys = await h.redis.keys(`${h.keyPrefix}:analytics:*`);
  if (keys.length > 0) await h.redis.del(...keys);
  await pool.end();
  destroyDeliveryAgents(agents);
  await h.close();
});

/** What the intake stores or queues for the world: events, deliveries, jobs, analytics buffers. */
async function storedState(): Promise<string> {
  const [events, deliveries, jobs, buffers] = await Promise.all([
    h.prisma.webhookEvent.count({ where: { worldId: world.id } }),
    h.prisma.webhookDelivery.count({ where: { endpointId } }),
    h.queue.getJobCounts(),
    h.redis.keys(`${h.keyPrefix}:analytics:*`),
  ]);
  return JSON.stringify({ events, deliveries, jobs, buffers: buffers.sort() });
}

const post = (path: string, rawBody: string, contentType = "application/json") =>
  fetch(`${target.baseUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${h.token}`, "content-type": contentType }, body: rawBody });

describe("hostile input on every event-ingest route", () => {
  it("enumerates the routes it fuzzes from the app itself", () => {
    const routes = target.routes.map((r) => `${r.method} ${r.path}`);
    expect(routes).toEqual(expect.arrayContaining(["post /v1/events", "post /v1/analytics", "post /v1/auth-hook", "get /healthz"]));
  });

  it("refuses every generated malformed request with a 4xx problem document, storing and queueing nothing", async () => {
    const before = await storedState();
    await fuzzTarget(target.baseUrl, malformedRequests(target), { seed: fuzzSeed("event-ingest malformed"), numRuns: fuzzRuns(300) });
    expect(await storedState()).toBe(before);
    expect(errors).toEqual([]);
  });

  it("never answers 5xx or a bare error to arbitrary requests", async () => {
    await fuzzTarget(target.baseUrl, arbitraryRequests(target), { seed: fuzzSeed("event-ingest arbitrary"), numRuns: fuzzRuns(300) });
    expect(errors).toEqual([]);
    expect((await fetch(`${target.baseUrl}/healthz`)).status).toBe(200);
  });

  it("answers what Node's HTTP parser refuses with a problem document too", async () => {
    await fuzzNodeLevel(target.baseUrl, "/v1/events", { seed: fuzzSeed("event-ingest node-level"), numRuns: fuzzRuns(40) });
  });
});

describe("platform text and nesting in events and analytics", () => {

  it("refuses an event id (or any string) with a NUL or a lone surrogate with 400 naming it, queueing nothing", async () => {
    await fc.assert(
      fc.asyncProperty(unsafeText, fc.constantFrom("/id", "/data/user/uuid", "/type"), async (bad, where) => {
        const before = await storedState();
        const event: Record<string, any> = {
          id: randomUUID(),
          world: `${world.organizationSlug}/${world.slug}`,
          type: "visitor.registered",
          timestamp: new Date().toISOString(),
          data: { user: { uuid: randomUUID() } },
        };
        if (where === "/id") event.id = bad;
        else if (where === "/type") event.type = bad;
        else event.data.user.uuid = bad;
        const res = await post("/v1/events", JSON.stringify(event));
        const body = (await res.json()) as { errors?: Array<{ pointer: string }> };
        expect(res.status).toBe(400);
        expect(body.errors).toEqual([expect.objectContaining({ pointer: where })]);
        expect(await storedState()).toBe(before);
      }),
      { seed: fuzzSeed("event-ingest event text"), numRuns: fuzzRuns(30) },
    );
  });

  it("refuses an analytics body nested 10,000 levels deep with 400 instead of overflowing the stack", async () => {
    for (const path of ["/v1/analytics", "/v1/events", "/v1/auth-hook"]) {
      const res = await post(path, `{"world":"${world.organizationSlug}/${world.slug}","events":[${"[".repeat(10_000)}${"]".repeat(10_000)}]}`);
      expect({ path, status: res.status, type: ((await res.json()) as { type: string }).type }).toEqual({ path, status: 400, type: "/problems/too-deeply-nested" });
    }
  });

  it("refuses a body in any charset but UTF-8 with 415", async () => {
    for (const charset of ["utf-16le", "utf-16be", "latin1"]) {
      const res = await post("/v1/events", "{}", `application/json; charset=${charset}`);
      expect({ charset, status: res.status }).toEqual({ charset, status: 415 });
    }
  });
});
