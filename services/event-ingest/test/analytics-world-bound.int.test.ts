/**
 * ANALYTICS_BUFFER_MAX_PER_WORLD against the real Redis: a world's endpoints together never hold
 * more analytics events than the world's limit (the operator's per-world value, else the platform
 * default), in flight included, even under concurrent posts; what does not fit is not buffered and
 * is counted in `vw_analytics_events_dropped_total{reason="world-buffer-full"}`.
 */
import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { analyticsKeys, claimAnalyticsBatch } from "@vw/queues";
import { closeServer, createServiceMetrics, listen, type Logger } from "@vw/service-kit";
import { parsePrometheusText, sampleSum } from "@vw/testing";
import { generateSecretBoxKey } from "@vw/webhook-core";
import { pseudonymKey } from "../src/analytics-privacy.js";
import { AnalyticsIntake } from "../src/analytics.service.js";
import { createIngestApp } from "../src/app.js";
import { conformance } from "./conformance.js";
import { PLAY_URL, startIngest, type IngestHarness } from "./harness.js";

const PER_ENDPOINT = 50;
const PER_WORLD = 60;
let h: IngestHarness;
let server: Server;
let baseUrl: string;
const warnings: unknown[] = [];
const logger = (() => {
  const noop = (): void => undefined;
  const l = { trace: noop, debug: noop, info: noop, warn: (f: unknown) => void warnings.push(f), error: noop, fatal: noop, child: () => l };
  return l as unknown as Logger;
})();

beforeAll(async () => {
  h = await startIngest();
  const metrics = createServiceMetrics("event-ingest");
  const analytics = new AnalyticsIntake(h.db, h.redis, logger, {
    keyPrefix: h.keyPrefix,
    pseudonymKey: pseudonymKey(null, generateSecretBoxKey()),
    bufferMax: PER_ENDPOINT,
    worldBufferMax: PER_WORLD,
    registry: metrics.registry,
  });
  const app = createIngestApp({ db: h.db, redis: h.redis, queue: h.queue, logger, ingestToken: h.token, playUrl: PLAY_URL, analytics, metrics, redisKeyPrefix: h.keyPrefix });
  server = await listen(app, 0, "127.0.0.1");
  conformance.attach(server);
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  const keys = await h.redis.keys(`${h.keyPrefix}:analytics:*`);
  if (keys.length > 0) await h.redis.del(...keys);
  await closeServer(server);
  await h.close();
});

const inner = () => {
  const at = new Date().toISOString();
  return { id: randomUUID(), type: "user.moved", timestamp: at, data: { eventName: "user.moved", source: "front", eventTime: at, user: { uuid: randomUUID() }, room: { url: `${PLAY_URL}/@/a/b/c.wam` }, properties: {} } };
};

async function post(world: string, count: number) {
  const res = await fetch(`${baseUrl}/v1/analytics`, {
    method: "POST",
    headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
    body: JSON.stringify({ world, events: Array.from({ length: count }, inner) }),
  });
  return { status: res.status, body: (await res.json()) as { accepted: number } };
}

const bufferLengths = (worldId: string, ids: string[]) => Promise.all(ids.map((id) => h.redis.llen(analyticsKeys(h.keyPrefix, worldId).buffer(id))));
const droppedMetric = async () =>
  sampleSum(parsePrometheusText(await (await fetch(`${baseUrl}/metrics`)).text()), "vw_analytics_events_dropped_total", { reason: "world-buffer-full" });

describe("the world's analytics buffer", () => {
  it("holds at most ANALYTICS_BUFFER_MAX_PER_WORLD events across its endpoints, in flight included; the rest is counted, the answer still 202", async () => {
    const world = await h.createWorld();
    const ids = [
      await h.createEndpoint(world, { subscriptions: ["analytics"] }),
      await h.createEndpoint(world, { subscriptions: ["analytics"] }),
      await h.createEndpoint(world, { subscriptions: ["analytics"] }),
    ];
    const before = await droppedMetric();
    // 30 events for 3 endpoints is 90 copies; the world holds 60: 20 events each fit.
    expect((await post(world.ref, 30)).status).toBe(202);
    expect(await bufferLengths(world.id, ids)).toEqual([20, 20, 20]);
    expect((await droppedMetric()) - before).toBe(30);
    expect(warnings).toContainEqual(expect.objectContaining({ worldId: world.id, refused: 30, worldBufferMax: PER_WORLD }));

    // A batch claimed by the flush is still held in Redis until it is stored: it still counts.
    const claim = await claimAnalyticsBatch(h.redis, h.keyPrefix, world.id, ids[0]!, 10, randomUUID());
    expect(claim.count).toBe(10);
    expect((await post(world.ref, 5)).status).toBe(202);
    expect(await bufferLengths(world.id, ids)).toEqual([10, 20, 20]);
    expect((await droppedMetric()) - before).toBe(45);
  });

  it("takes the world's own limit, set by the operator, over the platform default", async () => {
    const world = await h.createWorld();
    const id = await h.createEndpoint(world, { subscriptions: ["analytics"] });
    await h.prisma.world.update({ where: { id: world.id }, data: { analyticsBufferMax: 45 } });
    await post(world.ref, 40);
    await post(world.ref, 40);
    expect(await bufferLengths(world.id, [id])).toEqual([45]);
  });

  it("cannot be passed by concurrent posts", async () => {
    const world = await h.createWorld();
    const id = await h.createEndpoint(world, { subscriptions: ["analytics"] });
    await h.prisma.world.update({ where: { id: world.id }, data: { analyticsBufferMax: 25 } });
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(world.ref, 10)));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    expect(await bufferLengths(world.id, [id])).toEqual([25]);
  });

  it("leaves other worlds their own room", async () => {
    const full = await h.createWorld();
    const other = await h.createWorld();
    const fullId = await h.createEndpoint(full, { subscriptions: ["analytics"] });
    const otherId = await h.createEndpoint(other, { subscriptions: ["analytics"] });
    await post(full.ref, 50);
    await post(full.ref, 50);
    await post(other.ref, 30);
    expect([...(await bufferLengths(full.id, [fullId])), ...(await bufferLengths(other.id, [otherId]))]).toEqual([PER_ENDPOINT, 30]);
  });
});
