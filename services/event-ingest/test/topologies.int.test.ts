/**
 * event-ingest on the run's Sentinel group and 3-primary Cluster (packages/testing
 * test-topologies.ts), with the deliveries queue in 16 shards: the `member.connecting` hook (its
 * answer, its history rows, the endpoints not reached called after the answer, and the ingest
 * token's failure counter kept in Redis), the analytics intake into the world's buffer under the
 * world's hash tag with the world's bound refusing what passes it, and an event intake that wakes
 * each endpoint in its shard (its drain job, or a published wake and its flag when the job exists).
 * On the Cluster, a script or a transaction over keys of two slots would fail here with CROSSSLOT
 * (a 500, a missing wake, or the throttle falling back to counting in the process). The full suites of each run on the standalone Redis; these are the
 * representatives.
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { JOB_NAMES, analyticsKeys, analyticsWorldsKey, drainJobId, keySlot } from "@vw/queues";
import { HA_TEST_TOPOLOGIES, eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { generateSecret } from "@vw/webhook-core";
import { PLAY_URL as HOOK_PLAY_URL, startHookHarness, type HookHarness } from "./auth-hook-harness.js";
import { deliveriesWhere } from "./delivery-rows.js";
import { makeEvent } from "./fixtures.js";
import { PLAY_URL, startIngest, type IngestHarness } from "./harness.js";

const HOOK_TIMEOUT_MS = 500;
const PER_ENDPOINT = 50;
const PER_WORLD = 60;
const ROOM_URL = `${HOOK_PLAY_URL}/@/acme/hq/lobby.wam`;
const UUID = "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b";

/** A valid inner analytics event. */
const inner = () => {
  const at = new Date().toISOString();
  return { id: randomUUID(), type: "user.moved", timestamp: at, data: { eventName: "user.moved", source: "front", eventTime: at, user: { uuid: randomUUID() }, room: { url: `${PLAY_URL}/@/a/b/c.wam` }, properties: {} } };
};

describe.each(HA_TEST_TOPOLOGIES)("on %s", (topology) => {
  let api: IngestHarness;
  let hook: HookHarness;
  const receivers: WebhookReceiver[] = [];
  const receiver = async (options: Parameters<typeof startWebhookReceiver>[0]) => {
    const r = await startWebhookReceiver(options);
    receivers.push(r);
    return r;
  };

  beforeAll(async () => {
    api = await startIngest({ topology, queueShards: 16, analytics: { bufferMax: PER_ENDPOINT, worldBufferMax: PER_WORLD } });
    hook = await startHookHarness({ topology, timeoutMs: HOOK_TIMEOUT_MS });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  afterAll(async () => {
    await hook?.close();
    await api?.close();
  });

  it("answers member.connecting for two auth endpoints, signed, records both calls, and calls the one not reached after the answer", async () => {
    const secrets = [generateSecret(), generateSecret(), generateSecret()];
    const allow = await receiver({ secret: secrets[0]!, answer: 200 });
    const hung = await receiver({ secret: secrets[1]!, answer: "hang" });
    const late = await receiver({ secret: secrets[2]! });
    const world = await hook.createWorld();
    const t0 = Date.now() - 60_000;
    const allowId = await hook.createEndpoint(world, { url: allow.url, secret: secrets[0]!, createdAt: new Date(t0) });
    const hungId = await hook.createEndpoint(world, { url: hung.url, secret: secrets[1]!, createdAt: new Date(t0 + 1000) });
    const lateId = await hook.createEndpoint(world, { url: late.url, secret: secrets[2]!, createdAt: new Date(t0 + 2000) });

    const res = await hook.post({ world: world.ref, roomUrl: ROOM_URL, uuid: UUID, accessTokens: [] });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { endpointId: allowId, status: 200, durationMs: expect.any(Number) },
      { endpointId: hungId, status: null, durationMs: expect.any(Number), error: "timeout" },
      { endpointId: lateId, status: null, durationMs: 0, error: "not-reached" },
    ]);
    const [got] = allow.received;
    expect(got?.verifyError).toBeNull();
    expect(got?.verified).toMatchObject({ type: "member.connecting", data: { roomUrl: ROOM_URL, uuid: UUID } });
    // The endpoint not reached is called after the answer, signed as well.
    const [deferred] = await late.waitFor(1);
    expect(deferred!.verifyError).toBeNull();

    const rows = async () => deliveriesWhere(hook.prisma, { worldId: world.id });
    await eventually("the three calls are in the history", async () => (await rows()).length === 3, { timeoutMs: 20_000 });
    const byEndpoint = new Map((await rows()).map((d) => [d.endpointId, d]));
    expect(byEndpoint.get(allowId)).toMatchObject({ type: "member.connecting", status: "delivered", lastStatus: 200, attemptCount: 1 });
    expect(byEndpoint.get(hungId)).toMatchObject({ type: "member.connecting", status: "failed", lastStatus: null, attemptCount: 1 });
    expect(byEndpoint.get(lateId)).toMatchObject({ type: "member.connecting", status: "delivered", lastStatus: 204, attemptCount: 1 });
    expect(JSON.parse(Buffer.from(byEndpoint.get(allowId)!.body).toString("utf8")).deliveryId).toBe(got!.headers["webhook-id"]);
  });

  it("counts a wrong ingest token in Redis, not in the process", async () => {
    const res = await hook.post({ world: "acme/hq", roomUrl: ROOM_URL, uuid: UUID, accessTokens: [] }, "wrong-token-0123456789");
    expect(res.status).toBe(401);
    // The throttle falls back to counting in the process when its script fails (a CROSSSLOT, say).
    expect(await hook.redis.hget(`${hook.keyPrefix}:auth-failures:ingest-token:127.0.0.1`, "failures")).toBe("1");
    expect(hook.logs.map((l) => l.msg)).not.toContainEqual(expect.stringMatching(/throttle/));
  });

  it("buffers POST /v1/analytics for each endpoint under the world's hash tag, and refuses what passes the world's bound", async () => {
    const world = await api.createWorld();
    const ids = [
      await api.createEndpoint(world, { subscriptions: ["analytics"] }),
      await api.createEndpoint(world, { subscriptions: ["analytics"] }),
      await api.createEndpoint(world, { subscriptions: ["analytics"] }),
    ];
    const keys = analyticsKeys(api.keyPrefix, world.id);
    // One slot for the world's keys: its script checks and keeps the bound atomically.
    for (const id of ids) for (const key of [keys.buffer(id), keys.dropped(id), keys.inflight(id)]) expect(keySlot(key)).toBe(keySlot(keys.pending));
    const post = (count: number) => api.request("POST", "/v1/analytics", { body: { world: world.ref, events: Array.from({ length: count }, inner) } });
    const lengths = () => Promise.all(ids.map((id) => api.redis.llen(keys.buffer(id))));

    expect(await post(15)).toMatchObject({ status: 202, body: { accepted: 15, endpoints: 3 } });
    expect(await lengths()).toEqual([15, 15, 15]);
    expect((await api.redis.smembers(keys.pending)).sort()).toEqual([...ids].sort());
    expect(await api.redis.sismember(analyticsWorldsKey(api.keyPrefix), world.id)).toBe(1);

    // 45 of the world's 60 are held: 15 more copies fit, 5 events for each of the 3 endpoints.
    expect((await post(15)).status).toBe(202);
    expect(await lengths()).toEqual([20, 20, 20]);
    expect(api.logs).toContainEqual(expect.objectContaining({ fields: expect.objectContaining({ worldId: world.id, refused: 30, worldBufferMax: PER_WORLD }) }));
  });

  it("wakes each endpoint of an event in its own shard: a drain job for those without one, a published wake and the flag for one whose drain job exists", async () => {
    const world = await api.createWorld();
    const endpoints: string[] = [];
    // Endpoints in two shards at least: one request's wakes then go to two hash tags.
    while (endpoints.length < 2 || new Set(endpoints.map((id) => api.queue.shardOf(id))).size < 2) {
      endpoints.push(await api.createEndpoint(world, { subscriptions: ["visitor"] }));
    }
    // The first endpoint's drain exists (running or lingering): it is woken by a message, not a second job.
    const draining = endpoints[0]!;
    expect(await api.signals.wake([draining])).toBe(1);
    const existing = await api.drainJob(draining);
    await api.signals.takeFlag(draining);
    const wakes = await api.listenForWakes();
    const handle = wakes.register(draining);
    try {
      const event = makeEvent(world, "visitor.registered");
      const before = Date.now();
      const res = await api.post(event);
      expect(res).toMatchObject({ status: 202, body: { accepted: 1, duplicates: 0, deliveries: endpoints.length } });

      const stored = await api.prisma.webhookEvent.findFirstOrThrow({ where: { worldId: world.id, producerId: event.id } });
      const deliveries = await deliveriesWhere(api.prisma, { eventId: stored.id });
      expect(deliveries.map((d) => d.endpointId).sort()).toEqual([...endpoints].sort());
      for (const delivery of deliveries) {
        expect(delivery.state).toMatchObject({ status: "pending", attemptCount: 0, claimedUntil: null });
        expect(delivery.state!.dueAt!.getTime()).toBeGreaterThanOrEqual(before - 1000);
      }
      expect(await handle.wait(20_000)).toBe(true);
      expect(await api.signals.takeFlag(draining)).toBe(true);
      for (const endpointId of endpoints) {
        // Looked up in the endpoint's own shard (its hash tag): the wake went there.
        const job = await api.queue.queueFor(endpointId).getJob(drainJobId(endpointId));
        expect(job?.name).toBe(JOB_NAMES.drain);
        expect(job?.data).toEqual({ endpointId });
        expect(await job?.getState()).toBe("waiting");
        if (endpointId === draining) expect(job?.timestamp).toBe(existing?.timestamp);
      }
      expect((await api.jobs()).map((j) => j.id).sort()).toEqual(endpoints.map(drainJobId).sort());
    } finally {
      handle.release();
    }
  });
});
