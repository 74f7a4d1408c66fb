/**
 * The auth hook's answer budget: AUTH_HOOK_TIMEOUT_MS for the whole answer, whatever the number of
 * endpoints. Endpoints not reached in time are listed as `not-reached`, then called after the
 * answer, one after another, once each (no retry), recorded in the history, never counted.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { generateSecret } from "@vw/webhook-core";
import { deliveriesWhere } from "./delivery-rows.js";
import { PLAY_URL, startHookHarness, type HookHarness, type HookWorld } from "./auth-hook-harness.js";

const TIMEOUT_MS = 400;
const ROOM_URL = `${PLAY_URL}/@/acme/hq/lobby.wam`;
const UUID = "0b7d1f3a-5c9e-4a2b-8d6f-1e3a5c7b9d0f";
const hookBody = (world: string) => ({ world, roomUrl: ROOM_URL, uuid: UUID });

const receivers: WebhookReceiver[] = [];
async function receiver(options: Parameters<typeof startWebhookReceiver>[0] = {}): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver(options);
  receivers.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

/** Creates `n` auth endpoints on receivers made by `make`, in creation order. */
async function endpoints(h: HookHarness, world: HookWorld, n: number, make: (secret: string) => Promise<WebhookReceiver>) {
  const t0 = Date.now() - 60_000;
  const out: { id: string; receiver: WebhookReceiver }[] = [];
  for (let i = 0; i < n; i += 1) {
    const secret = generateSecret();
    const r = await make(secret);
    out.push({ id: await h.createEndpoint(world, { url: r.url, secret, createdAt: new Date(t0 + i * 1000) }), receiver: r });
  }
  return out;
}

/** The world's deliveries with their status (as the history reads it) and attempts. */
const historyOf = (prisma: PrismaClient, worldId: string) => deliveriesWhere(prisma, { worldId });

describe("with hanging receivers", () => {
  let h: HookHarness;
  beforeAll(async () => {
    h = await startHookHarness({ timeoutMs: TIMEOUT_MS });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("answers after the first hung endpoint's timeout with the five others not reached; they are then called one at a time, once each, recorded, never counted", async () => {
    const world = await h.createWorld();
    const hung = await endpoints(h, world, 6, (secret) => receiver({ secret, answer: "hang" }));

    const res = await h.post(hookBody(world.ref));
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: { endpointId: string }) => r.endpointId)).toEqual(hung.map((e) => e.id));
    expect(res.body.results[0]).toMatchObject({ status: null, error: "timeout" });
    for (const result of res.body.results.slice(1)) expect(result).toEqual({ endpointId: result.endpointId, status: null, durationMs: 0, error: "not-reached" });
    // When the answer left, only the first receiver had been called.
    expect(hung.map((e) => e.receiver.received.length)).toEqual([1, 0, 0, 0, 0, 0]);

    // Afterwards every other endpoint gets the event, in creation order, each call waiting for the
    // previous one's timeout (one at a time), and none twice.
    for (const e of hung.slice(1)) await e.receiver.waitFor(1);
    await h.hook.drain();
    expect(hung.map((e) => e.receiver.received.length)).toEqual([1, 1, 1, 1, 1, 1]);
    // One at a time: by the hook's own clock, each deferred call starts once the previous one has
    // ended (its timeout), in creation order; side by side they would overlap.
    const deferred = await historyOf(h.prisma, world.id);
    const calls = hung
      .slice(1)
      .map((e) => deferred.find((d) => d.endpointId === e.id)!.attempts[0]!)
      .map((a) => ({ start: a.startedAt.getTime(), end: a.startedAt.getTime() + a.durationMs }));
    for (let i = 1; i < calls.length; i += 1) expect(calls[i]!.start).toBeGreaterThanOrEqual(calls[i - 1]!.end - 1);

    // Recorded like the calls made before the answer: one finished delivery with one hook attempt each.
    const history = await historyOf(h.prisma, world.id);
    expect(history.map((d) => d.endpointId).sort()).toEqual(hung.map((e) => e.id).sort());
    for (const d of history) {
      expect(d).toMatchObject({ type: "member.connecting", status: "failed", attemptCount: 1 });
      // Final: nothing left for a drain to claim.
      expect(d.state).toMatchObject({ status: "failed", dueAt: null });
      expect(d.attempts).toEqual([expect.objectContaining({ trigger: "hook", errorKind: "timeout", attemptNumber: 1 })]);
    }
    // Never counted towards disabling.
    const rows = await h.prisma.webhookEndpoint.findMany({ where: { worldId: world.id } });
    expect(rows.map((r) => ({ enabled: r.enabled, consecutiveFailures: r.consecutiveFailures }))).toEqual(rows.map(() => ({ enabled: true, consecutiveFailures: 0 })));
  });
});

describe("with an injected clock", () => {
  let h: HookHarness;
  // The budget is read from this clock: it starts at 0 and jumps past the budget after `allowed` reads.
  let reads = 0;
  let allowed = 0;
  beforeAll(async () => {
    h = await startHookHarness({ timeoutMs: TIMEOUT_MS, monotonic: () => (reads++ < allowed ? 0 : 10 * TIMEOUT_MS) });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("calls no endpoint after the budget is spent, even quick ones, and calls them after the answer instead", async () => {
    const world = await h.createWorld();
    const quick = await endpoints(h, world, 3, (secret) => receiver({ secret }));
    // Reads: the deadline, then the first endpoint's turn; every later read is past the budget.
    reads = 0;
    allowed = 2;
    const res = await h.post(hookBody(world.ref));
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { endpointId: quick[0]!.id, status: 204, durationMs: expect.any(Number) },
      { endpointId: quick[1]!.id, status: null, durationMs: 0, error: "not-reached" },
      { endpointId: quick[2]!.id, status: null, durationMs: 0, error: "not-reached" },
    ]);
    await quick[2]!.receiver.waitFor(1);
    await h.hook.drain();
    expect(quick.map((e) => e.receiver.received.length)).toEqual([1, 1, 1]);
    expect(quick[2]!.receiver.received[0]!.at).toBeGreaterThanOrEqual(quick[1]!.receiver.received[0]!.at);
    const history = await historyOf(h.prisma, world.id);
    expect(history.map((d) => ({ endpointId: d.endpointId, status: d.status })).sort((a, b) => a.endpointId.localeCompare(b.endpointId))).toEqual(
      quick.map((e) => ({ endpointId: e.id, status: "delivered" })).sort((a, b) => a.endpointId.localeCompare(b.endpointId)),
    );
  });

  it("lists every endpoint as not reached when the budget is gone before the first call", async () => {
    const world = await h.createWorld();
    const quick = await endpoints(h, world, 2, (secret) => receiver({ secret }));
    reads = 0;
    allowed = 1;
    const res = await h.post(hookBody(world.ref));
    expect(res.body.results).toEqual(quick.map((e) => ({ endpointId: e.id, status: null, durationMs: 0, error: "not-reached" })));
    await quick[1]!.receiver.waitFor(1);
    await h.hook.drain();
    expect(quick.map((e) => e.receiver.received.length)).toEqual([1, 1]);
  });
});
