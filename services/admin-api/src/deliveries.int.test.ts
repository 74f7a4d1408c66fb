import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import net, { type AddressInfo } from "node:net";
import type { Queue } from "bullmq";
import { DeliveryLog, prismaRunner } from "@vw/db";
import { DrainSignals, JOB_NAMES, createRedisConnection, drainJobId, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { closeServer, listen, type Logger } from "@vw/service-kit";
import { startWebhookReceiver, verificationError, type WebhookReceiver } from "@vw/testing";
import { createDeliveryAgents, destroyDeliveryAgents } from "@vw/webhook-core";
import { conformance } from "../test/conformance.js";
import { createAdminApp } from "./app.js";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { createCurrentEndpoint, createWorld, deliveryRow, insertDelivery, type TestWorld } from "../test/delivery-fixtures.js";

let api: AdminApiHarness;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "any" });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await api.close();
});

/** A world with one current endpoint on a loopback receiver verifying with its secret. */
async function setUp(answer = 200) {
  const w = await createWorld(api);
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  const endpoint = await createCurrentEndpoint(api, w, r.url, ["recording", "visitor"]);
  r.setSecret(endpoint.secret);
  return { w, r, endpoint, base: `${w.endpoints}/${endpoint.id}` };
}

/** An endpoint whose URL nothing listens on: enough for rows inserted by hand. */
async function quietEndpoint(w: TestWorld) {
  return createCurrentEndpoint(api, w, "http://127.0.0.1:9/never", ["recording"]);
}

/** Every page of a list, following nextCursor. */
async function allPages(path: string, limit: number): Promise<{ pages: string[][]; ids: string[] }> {
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const res = await api.request("GET", `${path}${sep}limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`);
    expect(res.status).toBe(200);
    pages.push(res.body.items.map((d: { deliveryId: string }) => d.deliveryId));
    cursor = res.body.nextCursor;
  } while (cursor !== null && pages.length < 50);
  return { pages, ids: pages.flat() };
}

/** Jobs in this file's delivery queue (no worker reads it), of one endpoint: drains and timers. */
const jobsOf = async (endpointId: string) =>
  (await api.deliveryQueue.getJobs(["waiting", "delayed", "prioritized", "active"])).filter((j) => j.data.endpointId === endpointId);

describe("GET .../endpoints/{id}/deliveries", () => {
  it("lists newest first (created_at desc, then id desc), a page at a time without overlap or gap", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const t = Date.parse("2026-11-20T10:00:00.000Z");
    const same = new Date(t + 60_000);
    const ids = [
      await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, createdAt: new Date(t), status: "delivered" }),
      await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, createdAt: same, status: "failed" }),
      await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, createdAt: same, status: "pending" }),
      await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, createdAt: same, status: "skipped" }),
      await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, createdAt: new Date(t + 120_000), status: "delivered" }),
    ];
    const sameTime = ids.slice(1, 4).sort().reverse();
    const expected = [ids[4]!, ...sameTime, ids[0]!];

    const first = await api.request("GET", `${w.endpoints}/${endpoint.id}/deliveries`);
    expect(first.status).toBe(200);
    expect(first.body.nextCursor).toBeNull();
    expect(first.body.items.map((d: { deliveryId: string }) => d.deliveryId)).toEqual(expected);
    expect(first.body.items[0]).toEqual({
      deliveryId: ids[4],
      endpointId: endpoint.id,
      type: "recording.completed",
      test: false,
      status: "delivered",
      attemptCount: 0,
      lastStatus: null,
      nextAttemptAt: null,
      createdAt: new Date(t + 120_000).toISOString(),
      updatedAt: new Date(t + 120_000).toISOString(),
    });

    const paged = await allPages(`${w.endpoints}/${endpoint.id}/deliveries`, 2);
    expect(paged.pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(paged.ids).toEqual(expected);
  });

  it("filters by status, paginating within the filter; 400 for an unknown status", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const t = Date.parse("2026-11-20T10:00:00.000Z");
    const statuses = ["pending", "delivered", "pending", "failed", "pending", "skipped", "pending"] as const;
    const ids: string[] = [];
    for (const [i, status] of statuses.entries()) {
      ids.push(await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, createdAt: new Date(t + i * 1000), status }));
    }
    const pending = ids.filter((_, i) => statuses[i] === "pending").reverse();
    const list = `${w.endpoints}/${endpoint.id}/deliveries`;
    expect((await allPages(`${list}?status=pending`, 3)).ids).toEqual(pending);
    const failed = await api.request("GET", `${list}?status=failed`);
    expect(failed.body.items.map((d: { deliveryId: string; status: string }) => [d.deliveryId, d.status])).toEqual([[ids[3], "failed"]]);

    for (const query of ["status=bogus", "status=pending&status=failed", "limit=0", "cursor=nope"]) {
      const res = await api.request("GET", `${list}?${query}`);
      expectProblem(res, 400, "invalid-parameter");
    }
  });

  it("neither skips nor repeats a row when the cursor's delivery changes status between pages", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const t = Date.parse("2026-11-20T10:00:00.000Z");
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) ids.push(await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, createdAt: new Date(t - i * 1000) }));
    const list = `${w.endpoints}/${endpoint.id}/deliveries?status=pending&limit=2`;
    const first = await api.request("GET", list);
    expect(first.body.items.map((d: { deliveryId: string }) => d.deliveryId)).toEqual([ids[0], ids[1]]);
    // The worker delivers the page's last row before the next page is read (its state row goes).
    await api.prisma.deliveryState.delete({ where: { deliveryId: ids[1]! } });
    const second = await api.request("GET", `${list}&cursor=${first.body.nextCursor}`);
    expect(second.body.items.map((d: { deliveryId: string }) => d.deliveryId)).toEqual([ids[2], ids[3]]);
  });

  it("refuses a cursor of another endpoint, and 404s for an endpoint of another world", async () => {
    const w = await createWorld(api);
    const a = await quietEndpoint(w);
    const b = await quietEndpoint(w);
    const ofB = await insertDelivery(api, { endpointId: b.id, worldId: w.worldId });
    await insertDelivery(api, { endpointId: a.id, worldId: w.worldId });
    expectProblem(await api.request("GET", `${w.endpoints}/${a.id}/deliveries?cursor=${ofB}`), 400, "invalid-parameter");
    const other = await createWorld(api);
    expectProblem(await api.request("GET", `${other.endpoints}/${a.id}/deliveries`), 404, "not-found");
    const only = await api.request("GET", `${w.endpoints}/${a.id}/deliveries`);
    expect(only.body.items.map((d: { endpointId: string }) => d.endpointId)).toEqual([a.id]);
  });
});

describe("GET .../deliveries/{deliveryId}", () => {
  it("shows the body and the attempt as sent and answered: headers, signature, status, response body, duration", async () => {
    const { r, endpoint, base } = await setUp(200);
    const test = await api.request("POST", `${base}/test`, { body: { subscription: "recording" } });
    const [got] = await r.waitFor(1);

    const res = await api.request("GET", `${base}/deliveries/${test.body.deliveryId}`);
    expect(res.status).toBe(200);
    const sentBody = got!.body.toString("utf8");
    expect(res.body).toMatchObject({ deliveryId: test.body.deliveryId, endpointId: endpoint.id, type: "recording.completed", test: true, status: "delivered", attemptCount: 1, lastStatus: 200, body: sentBody });
    expect(res.body.attempts).toEqual([
      {
        attemptId: expect.any(String),
        attemptNumber: 1,
        trigger: "test",
        startedAt: expect.any(String),
        requestHeaders: expect.objectContaining({
          "content-type": "application/json",
          "user-agent": expect.any(String),
          "webhook-id": test.body.deliveryId,
          "webhook-timestamp": got!.headers["webhook-timestamp"],
          "webhook-signature": got!.headers["webhook-signature"],
        }),
        requestBody: sentBody,
        responseStatus: 200,
        responseHeaders: expect.objectContaining({ "content-length": "2" }),
        responseBody: "ok",
        responseBodyTruncated: false,
        durationMs: test.body.durationMs,
        errorKind: null,
        error: null,
        verdict: "delivered",
      },
    ]);
    // The log holds what a customer's library verifies: the recorded headers over the recorded body.
    const attempt = res.body.attempts[0];
    expect(verificationError(endpoint.secret, { body: Buffer.from(attempt.requestBody, "utf8"), headers: attempt.requestHeaders })).toBeNull();
  });

  it("lists every attempt oldest first, each with the delivery's body", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const id = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "failed", attemptCount: 2, lastStatus: 503, body: '{"x":"é"}' });
    const t = Date.parse("2026-11-20T10:00:00.000Z");
    const { createdAt: deliveryCreatedAt } = await deliveryRow(api, id);
    const attempt = (n: number, startedAt: number, trigger: string, status: number | null) => ({
      id: crypto.randomUUID(),
      deliveryId: id,
      deliveryCreatedAt,
      endpointId: endpoint.id,
      attemptNumber: n,
      trigger,
      startedAt: new Date(startedAt),
      requestHeaders: { "webhook-id": id, "webhook-timestamp": String(Math.floor(startedAt / 1000)) },
      responseStatus: status,
      durationMs: 12,
      verdict: "retry",
      ...(status === null ? { errorKind: "timeout", error: "timed out" } : { responseBody: "busy" }),
    });
    // Inserted newest first, so the order shown cannot come from insertion order.
    await api.prisma.deliveryAttempt.create({ data: attempt(2, t + 5000, "retry", 503) });
    await api.prisma.deliveryAttempt.create({ data: attempt(1, t, "initial", null) });
    const res = await api.request("GET", `${w.endpoints}/${endpoint.id}/deliveries/${id}`);
    expect(res.body.body).toBe('{"x":"é"}');
    expect(res.body.attempts.map((a: { attemptNumber: number; trigger: string; requestBody: string }) => [a.attemptNumber, a.trigger, a.requestBody])).toEqual([
      [1, "initial", '{"x":"é"}'],
      [2, "retry", '{"x":"é"}'],
    ]);
    expect(res.body.attempts[0]).toMatchObject({ responseStatus: null, responseHeaders: null, errorKind: "timeout", error: "timed out" });
  });

  it("404s for a delivery of another endpoint or world, an unknown or malformed id", async () => {
    const w = await createWorld(api);
    const a = await quietEndpoint(w);
    const b = await quietEndpoint(w);
    const ofA = await insertDelivery(api, { endpointId: a.id, worldId: w.worldId });
    const ofB = await insertDelivery(api, { endpointId: b.id, worldId: w.worldId });
    const other = await createWorld(api);
    const elsewhere = await quietEndpoint(other);
    const ofElsewhere = await insertDelivery(api, { endpointId: elsewhere.id, worldId: other.worldId });

    expect((await api.request("GET", `${w.endpoints}/${a.id}/deliveries/${ofA}`)).status).toBe(200);
    for (const path of [
      `${w.endpoints}/${a.id}/deliveries/${ofB}`,
      `${w.endpoints}/${a.id}/deliveries/${ofElsewhere}`,
      `${other.endpoints}/${a.id}/deliveries/${ofA}`,
      `${w.endpoints}/${a.id}/deliveries/00000000-0000-4000-8000-000000000000`,
      `${w.endpoints}/${a.id}/deliveries/not-a-uuid`,
    ]) {
      expectProblem(await api.request("GET", path), 404, "not-found");
      expectProblem(await api.request("POST", `${path}/replay`), 404, "not-found");
    }
    for (const endpoint of [a, b, elsewhere]) expect(await jobsOf(endpoint.id)).toEqual([]);
  });
});

describe("POST .../deliveries/{deliveryId}/replay", () => {
  it("answers 202, puts the delivery back to pending in a new run, due at once, and wakes its endpoint's drain", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const id = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "failed", attemptCount: 10, lastStatus: 503 });
    const bodyBefore = (await deliveryRow(api, id)).body;
    const signals = new DrainSignals(api.deliveryQueue);

    const res = await api.request("POST", `${w.endpoints}/${endpoint.id}/deliveries/${id}/replay`);
    expect(res.status).toBe(202);
    expect(res.headers.get("location")).toBe(`${w.endpoints}/${endpoint.id}/deliveries/${id}`);
    expect(res.body).toMatchObject({ deliveryId: id, endpointId: endpoint.id, status: "pending", attemptCount: 10, lastStatus: 503 });
    // Due at once: PostgreSQL's state row is the schedule of record.
    expect(Date.parse(res.body.nextAttemptAt)).toBeLessThanOrEqual(Date.now());

    // A new run, its schedule from the start; the bytes to send are the stored ones.
    const row = await deliveryRow(api, id);
    expect(row).toMatchObject({ status: "pending", run: 1, runAttempts: 0, attemptCount: 10, claimedUntil: null });
    expect(row.body.equals(bodyBefore)).toBe(true);
    const state = await api.prisma.deliveryState.findUniqueOrThrow({ where: { deliveryId: id } });
    expect(Buffer.from(state.body!).equals(bodyBefore)).toBe(true);
    // The endpoint is woken: its one drain job, and the flag a running drain reads before each claim.
    const jobs = await jobsOf(endpoint.id);
    expect(jobs.map((j) => ({ name: j.name, id: j.id, data: j.data }))).toEqual([{ name: JOB_NAMES.drain, id: drainJobId(endpoint.id), data: { endpointId: endpoint.id } }]);
    expect(await signals.takeFlag(endpoint.id)).toBe(true);

    // Each replay is a run of its own; the endpoint keeps one drain job, flagged again.
    expect((await api.request("POST", `${w.endpoints}/${endpoint.id}/deliveries/${id}/replay`)).status).toBe(202);
    expect(await deliveryRow(api, id)).toMatchObject({ status: "pending", run: 2, runAttempts: 0 });
    expect((await jobsOf(endpoint.id)).map((j) => j.id)).toEqual([drainJobId(endpoint.id)]);
    expect(await signals.takeFlag(endpoint.id)).toBe(true);
  });

  it("replays a delivered delivery (its attempts counted) and a pending one waiting on Retry-After, which then waits no longer", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const delivered = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "delivered" });
    const createdAt = (await deliveryRow(api, delivered)).createdAt;
    await api.prisma.deliveryAttempt.create({
      data: {
        id: crypto.randomUUID(),
        deliveryId: delivered,
        deliveryCreatedAt: createdAt,
        endpointId: endpoint.id,
        attemptNumber: 1,
        trigger: "initial",
        startedAt: createdAt,
        requestHeaders: { "webhook-id": delivered },
        responseStatus: 204,
        durationMs: 9,
        verdict: "delivered",
      },
    });
    const replayed = await api.request("POST", `${w.endpoints}/${endpoint.id}/deliveries/${delivered}/replay`);
    expect(replayed.status).toBe(202);
    expect(replayed.body).toMatchObject({ status: "pending", attemptCount: 1, lastStatus: 204 });
    expect(await deliveryRow(api, delivered)).toMatchObject({ status: "pending", run: 1, runAttempts: 0, attemptCount: 1 });

    const reason = "the receiver asked to wait 10 minutes";
    const waiting = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "pending", attemptCount: 1, lastStatus: 429, nextAttemptAt: new Date(Date.now() + 600_000), waitReason: reason });
    // Why it waits longer than the schedule, in the detail and the list (the one pending delivery that does).
    expect((await api.request("GET", `${w.endpoints}/${endpoint.id}/deliveries/${waiting}`)).body.nextAttemptReason).toBe(reason);
    const list = await api.request("GET", `${w.endpoints}/${endpoint.id}/deliveries?status=pending`);
    expect(list.body.items.map((d: { deliveryId: string; nextAttemptReason?: string }) => [d.deliveryId, d.nextAttemptReason])).toEqual([
      [waiting, reason],
      [delivered, undefined],
    ]);
    const res = await api.request("POST", `${w.endpoints}/${endpoint.id}/deliveries/${waiting}/replay`);
    expect(res.status).toBe(202);
    expect(res.body.nextAttemptReason).toBeUndefined();
    expect(Date.parse(res.body.nextAttemptAt)).toBeLessThanOrEqual(Date.now());
    expect(await deliveryRow(api, waiting)).toMatchObject({ status: "pending", run: 1, waitReason: null });
  });

  it("replays a Test delivery with its stored bytes", async () => {
    const { base, r } = await setUp(500);
    const test = await api.request("POST", `${base}/test`);
    expect(test.body.verdict).toBe("retry");
    const res = await api.request("POST", `${base}/deliveries/${test.body.deliveryId}/replay`);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ deliveryId: test.body.deliveryId, test: true, status: "pending" });
    expect(Buffer.from((await deliveryRow(api, test.body.deliveryId)).body).equals(r.received[0]!.body)).toBe(true);
  });

  it("answers 409 endpoint-disabled while the endpoint is disabled, changing nothing and queueing nothing", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const id = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "failed", attemptCount: 1, lastStatus: 500 });
    await api.prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { enabled: false, disabledReason: "gone", disabledAt: new Date() } });
    const before = await deliveryRow(api, id);
    const res = await api.request("POST", `${w.endpoints}/${endpoint.id}/deliveries/${id}/replay`);
    expectProblem(res, 409, "endpoint-disabled");
    expect(await deliveryRow(api, id)).toEqual(before);
    expect(await jobsOf(endpoint.id)).toEqual([]);
    // Once re-enabled, the same replay goes through.
    await api.request("POST", `${w.endpoints}/${endpoint.id}/enable`);
    expect((await api.request("POST", `${w.endpoints}/${endpoint.id}/deliveries/${id}/replay`)).status).toBe(202);
  });

  /** Replays through an app whose delivery queue is `queue`; returns the answer. */
  async function replayThrough(queue: DeliveryQueues, path: string) {
    const deliveryAgents = createDeliveryAgents("any");
    const silent = { debug() {}, info() {}, warn() {}, error() {} } as unknown as Logger;
    const app = createAdminApp({
      prisma: api.prisma,
      logger: silent,
      adminToken: api.adminToken,
      publicMapStorageUrl: "http://m",
      playUrl: "http://p",
      secretBox: api.secretBox,
      endpointUrlPolicy: "any",
      deliveryQueue: queue,
      recoveryQueue: queue.shards[0] as Queue,
      deliveryAgents,
      deliveryTimeoutMs: 1000,
      enqueueTimeoutMs: 300,
    });
    const server = await listen(app, 0, "127.0.0.1");
    conformance.attach(server);
    try {
      const port = (server.address() as AddressInfo).port;
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { authorization: `Bearer ${api.adminToken}` } });
      return { status: res.status, contentType: res.headers.get("content-type"), body: (await res.json()) as Record<string, unknown> };
    } finally {
      await closeServer(server);
      destroyDeliveryAgents(deliveryAgents);
    }
  }

  /** The replay was accepted into PostgreSQL: pending in a new run, due, and among what the worker's reconciler wakes. */
  async function expectOwedByPostgres(endpointId: string, id: string, run: number) {
    const row = await deliveryRow(api, id);
    expect(row).toMatchObject({ status: "pending", run });
    // The test files share one database, and a delivery-worker started by another file wakes every
    // due endpoint in it: a replay already claimed or tried by it is being delivered, as it should.
    if (row.claimedUntil !== null || (row.runAttempts ?? 0) > 0) return;
    expect(row.nextAttemptAt!.getTime()).toBeLessThanOrEqual(Date.now());
    const due = await new DeliveryLog(prismaRunner(api.prisma)).dueEndpoints();
    expect(due.map((d) => d.endpointId)).toContain(endpointId);
  }

  it("accepts the replay when Redis is gone: PostgreSQL holds it due, for the worker's reconciler to wake", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const id = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "failed", attemptCount: 3, lastStatus: 400 });
    const redis = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "producer");
    redis.on("error", () => {});
    const queue = openDeliveryQueues(redis, api.redisKeyPrefix);
    await queue.waitUntilReady();
    redis.disconnect();
    try {
      const res = await replayThrough(queue, `${w.endpoints}/${endpoint.id}/deliveries/${id}/replay`);
      expect(res).toMatchObject({ status: 202, body: { deliveryId: id, status: "pending" } });
      await expectOwedByPostgres(endpoint.id, id, 1);
      expect(await jobsOf(endpoint.id)).toEqual([]);
    } finally {
      await queue.close().catch(() => {});
    }
  });

  it("accepts the replay when Redis does not answer in time, without waiting for it", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const id = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "pending", attemptCount: 2, lastStatus: 503, nextAttemptAt: new Date(Date.now() + 600_000) });
    // A "Redis" that accepts connections and never answers: BullMQ would wait for it forever.
    const sockets = new Set<net.Socket>();
    const silentServer = net.createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silentServer.listen(0, "127.0.0.1", resolve));
    const redis = createRedisConnection(`redis://127.0.0.1:${(silentServer.address() as AddressInfo).port}`, "producer");
    redis.on("error", () => {});
    const queue = openDeliveryQueues(redis, api.redisKeyPrefix);
    queue.on("error", () => {});
    try {
      // The answer comes (after enqueueTimeoutMs) although the wake never does.
      const res = await replayThrough(queue, `${w.endpoints}/${endpoint.id}/deliveries/${id}/replay`);
      expect(res).toMatchObject({ status: 202, body: { deliveryId: id, status: "pending" } });
      await expectOwedByPostgres(endpoint.id, id, 1);
    } finally {
      redis.disconnect();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silentServer.close(resolve));
    }
  });
});

describe("POST .../endpoints/{id}/disable and the deliveries waiting for it", () => {
  it("turns the endpoint's pending deliveries into skipped at once, and re-enabling brings none back", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const sibling = await quietEndpoint(w);
    const waitingRetry = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "pending", attemptCount: 2, nextAttemptAt: new Date(Date.now() + 60_000) });
    const queued = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "pending" });
    const delivered = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "delivered", attemptCount: 1, lastStatus: 200 });
    const failed = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "failed", attemptCount: 1, lastStatus: 400 });
    const ofSibling = await insertDelivery(api, { endpointId: sibling.id, worldId: w.worldId, status: "pending" });

    expect((await api.request("POST", `${w.endpoints}/${endpoint.id}/disable`)).status).toBe(200);
    for (const id of [waitingRetry, queued]) expect(await deliveryRow(api, id)).toMatchObject({ status: "skipped", nextAttemptAt: null });
    expect((await deliveryRow(api, waitingRetry)).attemptCount).toBe(2);
    expect((await deliveryRow(api, delivered)).status).toBe("delivered");
    expect((await deliveryRow(api, failed)).status).toBe("failed");
    expect((await deliveryRow(api, ofSibling)).status).toBe("pending");

    const list = await api.request("GET", `${w.endpoints}/${endpoint.id}/deliveries?status=skipped`);
    expect(list.body.items.map((d: { deliveryId: string }) => d.deliveryId).sort()).toEqual([waitingRetry, queued].sort());

    expect((await api.request("POST", `${w.endpoints}/${endpoint.id}/enable`)).body.enabled).toBe(true);
    for (const id of [waitingRetry, queued]) expect((await deliveryRow(api, id)).status).toBe("skipped");
    expect(await jobsOf(endpoint.id)).toEqual([]);
  });

  it("touches no delivery when the endpoint id belongs to another world", async () => {
    const w = await createWorld(api);
    const endpoint = await quietEndpoint(w);
    const id = await insertDelivery(api, { endpointId: endpoint.id, worldId: w.worldId, status: "pending" });
    const other = await createWorld(api);
    expectProblem(await api.request("POST", `${other.endpoints}/${endpoint.id}/disable`), 404, "not-found");
    expect((await deliveryRow(api, id)).status).toBe("pending");
    expect((await api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: endpoint.id } })).enabled).toBe(true);
  });
});
