/**
 * The limits of attempts in flight, as receivers see them:
 * - DELIVERY_CONCURRENCY bounds the POSTs one worker has in flight across all its endpoints (the
 *   drains share the process's attempt slots), although each endpoint's window is wider;
 * - DELIVERY_ENDPOINT_CONCURRENCY bounds the requests one endpoint's receiver has in flight, across
 *   two worker replicas sharing one Redis: one drain per endpoint at a time (its job id), and the
 *   window is that drain's.
 *
 * The receivers hold requests and answer them together once the limit is held at once, a little
 * later: a limit that held back more would stop the test (deliveries never done), and one more
 * request than the limit would be seen held with the others.
 */
import type { ServerResponse } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { drainJobId } from "@vw/queues";
import { eventually, parsePrometheusText, sampleSum, spawnService, startWebhookReceiver, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness, type TestEndpoint } from "./harness.js";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Requests held, answered 200 together once `group` are held; `most` is the most held at once. */
class GroupAnswer {
  private readonly held: ServerResponse[] = [];
  most = 0;

  constructor(private readonly group: number) {}

  readonly answer = (_req: unknown, res: ServerResponse): void => {
    this.held.push(res);
    this.most = Math.max(this.most, this.held.length);
    if (this.held.length < this.group) return;
    // A little later, so that a request past the limit, were one sent, would be seen held too.
    setTimeout(() => {
      for (const r of this.held.splice(0)) {
        r.statusCode = 200;
        r.end();
      }
    }, 50);
  };

  get holding(): number {
    return this.held.length;
  }
}

describe("DELIVERY_CONCURRENCY", () => {
  const CONCURRENCY = 3;
  let h: Harness;
  const receivers: WebhookReceiver[] = [];
  const shared = new GroupAnswer(CONCURRENCY);

  beforeAll(async () => {
    // Windows wider than the process limit, so only DELIVERY_CONCURRENCY can hold the POSTs back.
    h = await startHarness({ deliveryConcurrency: CONCURRENCY, endpointConcurrency: 10 });
    for (let i = 0; i < 4; i += 1) receivers.push(await startWebhookReceiver({ answer: shared.answer }));
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  it("never has more POSTs in flight than DELIVERY_CONCURRENCY, across all endpoints", async () => {
    const world = await h.createWorld();
    const seeded: { endpoint: TestEndpoint; deliveryId: string }[] = [];
    for (const receiver of receivers) {
      const endpoint = await h.createEndpoint(world.id, { url: receiver.url });
      for (let i = 0; i < 6; i += 1) seeded.push({ endpoint, deliveryId: await h.seedDelivery(endpoint, { wake: false }) });
    }
    // Every endpoint woken at once: the worker has 24 to send, 6 per endpoint, windows of 10.
    await h.wake([...new Set(seeded.map((s) => s.endpoint.id))]);
    const settled = await Promise.all(seeded.map((s) => h.settled(s.endpoint.id, s.deliveryId, undefined, 60_000)));
    expect(settled.map((d) => d.status)).toEqual(seeded.map(() => "delivered"));
    expect(receivers.reduce((n, r) => n + r.received.length, 0)).toBe(seeded.length);
    // The limit was reached (the groups were answered) and never passed.
    expect(shared.most).toBe(CONCURRENCY);
    expect(shared.holding).toBe(0);
  }, 90_000);
});

describe("DELIVERY_ENDPOINT_CONCURRENCY across two replicas", () => {
  const WINDOW = 3;
  const ENDPOINTS = 4;
  let h: Harness;
  const replicas: ServiceProcess[] = [];
  const receivers: WebhookReceiver[] = [];
  const answers: GroupAnswer[] = [];

  beforeAll(async () => {
    h = await startHarness({ inProcessWorker: false });
    // A short linger, so that drains end between waves and the next wave's jobs go to either replica.
    const env = h.processEnv({ DELIVERY_ENDPOINT_CONCURRENCY: String(WINDOW), DELIVERY_CONCURRENCY: "50", DRAIN_LINGER_MS: "100", RETRY_DELAYS: "1s" });
    replicas.push(...(await Promise.all([spawnService(serviceDir, env, { readyTimeoutMs: 60_000 }), spawnService(serviceDir, env, { readyTimeoutMs: 60_000 })])));
    for (let i = 0; i < ENDPOINTS; i += 1) {
      const answer = new GroupAnswer(WINDOW);
      answers.push(answer);
      receivers.push(await startWebhookReceiver({ answer: answer.answer }));
    }
  }, 90_000);
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await h?.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  /** Attempts a replica made, from its `/metrics`. */
  async function attemptsOf(replica: ServiceProcess): Promise<number> {
    const text = await (await fetch(`${replica.url}/metrics`)).text();
    return sampleSum(parsePrometheusText(text), "vw_delivery_attempts_total");
  }

  it("a receiver never has more requests in flight than the endpoint's window, whichever replica drains it", async () => {
    const world = await h.createWorld();
    const endpoints: TestEndpoint[] = [];
    for (const receiver of receivers) endpoints.push(await h.createEndpoint(world.id, { url: receiver.url }));
    const ids = new Map<string, string[]>(endpoints.map((e) => [e.id, []]));

    // Waves of 2 windows per endpoint, all due before the wake, until both replicas drained some
    // (at least three waves).
    let waves = 0;
    for (; waves < 3 || Math.min(...(await Promise.all(replicas.map(attemptsOf)))) === 0; waves += 1) {
      if (waves >= 20) throw new Error(`after ${waves} waves, one replica never drained an endpoint: ${await Promise.all(replicas.map(attemptsOf))} attempts`);
      const wave: { endpoint: TestEndpoint; deliveryId: string }[] = [];
      for (const endpoint of endpoints) {
        for (let i = 0; i < 2 * WINDOW; i += 1) wave.push({ endpoint, deliveryId: await h.seedDelivery(endpoint, { wake: false }) });
      }
      for (const w of wave) ids.get(w.endpoint.id)!.push(w.deliveryId);
      await h.wake(endpoints.map((e) => e.id));
      const settled = await Promise.all(wave.map((w) => h.settled(w.endpoint.id, w.deliveryId, undefined, 60_000)));
      expect(settled.map((d) => d.status)).toEqual(wave.map(() => "delivered"));
      // The drains end (nothing left, the linger passed) before the next wave, which gets new jobs.
      await eventually(
        "every endpoint's drain ended",
        async () => (await Promise.all(endpoints.map((e) => h.deliveries.queueFor(e.id).getJob(drainJobId(e.id))))).every((job) => job === undefined),
        { timeoutMs: 30_000 },
      );
    }

    const [first, second] = await Promise.all(replicas.map(attemptsOf));
    expect(first! + second!).toBe(waves * ENDPOINTS * 2 * WINDOW);
    expect(first).toBeGreaterThan(0);
    expect(second).toBeGreaterThan(0);
    for (const [i, endpoint] of endpoints.entries()) {
      // Each delivery once, and the window filled and never passed.
      expect(receivers[i]!.received.map((r) => r.headers["webhook-id"]).sort()).toEqual([...ids.get(endpoint.id)!].sort());
      expect({ endpoint: i, most: answers[i]!.most }).toEqual({ endpoint: i, most: WINDOW });
    }
  }, 240_000);
});
