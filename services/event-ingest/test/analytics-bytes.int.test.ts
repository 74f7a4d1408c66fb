/**
 * Analytics events are bounded in bytes, against the real Redis: an inner event larger than
 * ANALYTICS_EVENT_MAX_BYTES is refused with 413 naming it (its index and id) and nothing of the
 * request is buffered; a world's buffer holds at most ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD bytes of
 * events across its endpoints' copies, in flight included, whatever their number.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { analyticsKeys, claimAnalyticsBatch, releaseAnalyticsBatch } from "@vw/queues";
import { PLAY_URL, startIngest, type IngestHarness } from "./harness.js";

const EVENT_MAX = 16 * 1024;
const WORLD_MAX_BYTES = 60 * 1024;
let h: IngestHarness;

beforeAll(async () => {
  h = await startIngest({ analytics: { bufferMax: 1000, worldBufferMax: 10_000, worldBufferMaxBytes: WORLD_MAX_BYTES }, analyticsEventMaxBytes: EVENT_MAX });
});
afterAll(async () => {
  await h.close();
});

/** An inner event carrying `padding` characters in a property (kept by the privacy rules). */
const inner = (padding = 0) => {
  const at = new Date().toISOString();
  return {
    id: randomUUID(),
    type: "cowebsite.opened",
    timestamp: at,
    data: { eventName: "cowebsite.opened", source: "front", eventTime: at, user: { uuid: randomUUID() }, room: { url: `${PLAY_URL}/@/a/b/c.wam` }, properties: { note: "p".repeat(padding) } },
  };
};

async function post(world: string, events: unknown[]) {
  const res = await h.request("POST", "/v1/analytics", { body: { world, events } });
  return { status: res.status, body: res.body as Record<string, unknown> };
}

/** Bytes of the events in each endpoint's buffer list, and in its in-flight batch. */
async function heldBytes(worldId: string, ids: string[]): Promise<number> {
  const keys = analyticsKeys(h.keyPrefix, worldId);
  let total = 0;
  for (const id of ids) {
    for (const text of await h.redis.lrange(keys.buffer(id), 0, -1)) total += Buffer.byteLength(text);
    total += Number((await h.redis.hget(keys.inflight(id), "b")) ?? 0);
  }
  return total;
}

describe("an analytics event over ANALYTICS_EVENT_MAX_BYTES", () => {
  it("is refused with 413 naming it (index and id); nothing of the request is buffered", async () => {
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world, { subscriptions: ["analytics"] });
    const big = inner(EVENT_MAX);
    const res = await post(world.ref, [inner(), big, inner()]);
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ type: "/problems/payload-too-large", limit: EVENT_MAX, errors: [{ pointer: "/events/1" }] });
    expect(String((res.body["errors"] as { detail: string }[])[0]!.detail)).toContain(big.id);
    expect(await h.redis.llen(analyticsKeys(h.keyPrefix, world.id).buffer(endpoint))).toBe(0);
    // One just under the limit is accepted.
    expect((await post(world.ref, [inner(EVENT_MAX - 1000)])).status).toBe(202);
  });
});

describe("the world's buffer in bytes", () => {
  it("holds at most ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD across its endpoints' copies, in flight included; room comes back once a batch is released", async () => {
    const world = await h.createWorld();
    const ids = [await h.createEndpoint(world, { subscriptions: ["analytics"] }), await h.createEndpoint(world, { subscriptions: ["analytics"] })];
    // 12 events of about 5 KB for 2 endpoints: 120 KB of copies, twice what the world may hold.
    const answer = await post(world.ref, Array.from({ length: 12 }, () => inner(5000)));
    expect(answer.status).toBe(202);
    const held = await heldBytes(world.id, ids);
    expect(held).toBeLessThanOrEqual(WORLD_MAX_BYTES);
    expect(held).toBeGreaterThan(WORLD_MAX_BYTES - 2 * 6000);
    // The counters the scripts keep are the bytes the lists hold.
    const keys = analyticsKeys(h.keyPrefix, world.id);
    for (const id of ids) {
      const listed = (await h.redis.lrange(keys.buffer(id), 0, -1)).reduce((n, t) => n + Buffer.byteLength(t), 0);
      expect(Number(await h.redis.get(keys.bytes(id)))).toBe(listed);
    }

    // A batch claimed by the flush still counts until it is released.
    const deliveryId = randomUUID();
    const claim = await claimAnalyticsBatch(h.redis, h.keyPrefix, world.id, ids[0]!, 2, deliveryId);
    expect(claim.count).toBe(2);
    await post(world.ref, [inner(5000)]);
    expect(await heldBytes(world.id, ids)).toBe(held);
    await releaseAnalyticsBatch(h.redis, h.keyPrefix, world.id, ids[0]!, deliveryId);
    await post(world.ref, [inner(5000)]);
    expect(await heldBytes(world.id, ids)).toBeGreaterThan(held - claim.count * 6000);
    expect(await heldBytes(world.id, ids)).toBeLessThanOrEqual(WORLD_MAX_BYTES);
  });
});
