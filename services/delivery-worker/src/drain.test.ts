/**
 * One endpoint's drain (drain.ts) with a fake delivery store and fake signals (the SQL and the
 * Redis scripts are tested in @vw/db and @vw/queues), sending real requests to a loopback
 * receiver: it never has more attempts in flight than the endpoint's window, claims a few windows
 * at a time, records every attempt with its fate before it ends, sets the retry's timer, stops at
 * a 410 without starting more, skips the deliveries of an endpoint disabled since, gives back what
 * it claimed but did not start when the worker closes, and goes on when its endpoint is woken
 * while it lingers.
 */
import type { ServerResponse } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import type { AttemptApplication, ClaimedDelivery } from "@vw/db";
import type { DrainSignals, DrainWakeHandle } from "@vw/queues";
import { createServiceMetrics } from "@vw/service-kit";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents, generateSecretBoxKey, SecretCache, type DeliveryAgents } from "@vw/webhook-core";
import { AttemptSlots } from "./attempt-slots.js";
import type { DeliveryStore } from "./delivery-store.js";
import { CLAIM_ROUNDS, drainEndpoint, type DrainDeps } from "./drain.js";
import type { DisableCause, EndpointDisabler } from "./endpoint-disabler.js";
import { WorkerMetrics } from "./metrics.js";
import { WakeTimers } from "./wake-timers.js";
import { EndpointWindows } from "./windows.js";

const ENDPOINT = "0190a3c0-0000-7000-8000-000000000001";
let receiver: WebhookReceiver;
let agents: DeliveryAgents;

beforeAll(async () => {
  receiver = await startWebhookReceiver({ answer: 200 });
  agents = createDeliveryAgents("any");
});
afterAll(async () => {
  destroyDeliveryAgents(agents);
  await receiver.close();
});
afterEach(() => {
  receiver.answerWith(200);
  receiver.received.length = 0;
});

/** The endpoint's pending deliveries as a fake store holds them: claims take from the front. */
class FakeStore {
  readonly pending: ClaimedDelivery[] = [];
  readonly claims: { limit: number; got: string[] }[] = [];
  readonly recorded: AttemptApplication[] = [];
  readonly skipped: string[] = [];
  readonly released: string[] = [];
  /** Claims renewed; those in `lost` had expired and were taken by another drain. */
  readonly renewed: string[] = [];
  readonly lost = new Set<string>();
  /** Consecutive failures the log answers after each write that changes them. */
  failures = 0;
  /** How long a write takes (a group commit is a round trip to PostgreSQL); 0: a microtask. */
  writeMs = 0;
  private next = 0;

  add(n: number, options: { enabled?: boolean; leaseLeftMs?: number } = {}): string[] {
    const ids: string[] = [];
    for (let i = 0; i < n; i += 1) {
      this.next += 1;
      const deliveryId = `0190a3c0-0000-7000-8000-${String(this.next).padStart(12, "0")}`;
      ids.push(deliveryId);
      this.pending.push({
        deliveryId,
        endpointId: ENDPOINT,
        createdAt: new Date(),
        dueAt: new Date(),
        run: 0,
        runAttempts: 0,
        attemptCount: 0,
        body: Buffer.from(JSON.stringify({ deliveryId })),
        test: false,
        trace: null,
        claimedUntil: new Date(Date.now() + (options.leaseLeftMs ?? 60_000)),
        lease: "lease-1",
        endpoint: { url: receiver.url, enabled: options.enabled ?? true, secretSealed: null, rateLimitPerSecond: null, headersSealed: null },
      });
    }
    return ids;
  }

  asStore(): DeliveryStore {
    return {
      claim: async (_endpointId: string, limit: number) => {
        const got = this.pending.splice(0, limit);
        this.claims.push({ limit, got: got.map((d) => d.deliveryId) });
        return got;
      },
      record: async (application: AttemptApplication) => {
        if (this.writeMs > 0) await new Promise((resolve) => setTimeout(resolve, this.writeMs));
        this.recorded.push(application);
        if (application.failures === "reset") this.failures = 0;
        if (application.failures === "increment") this.failures += 1;
        return application.failures === "none" ? undefined : this.failures;
      },
      skip: async (deliveries: readonly ClaimedDelivery[]) => void this.skipped.push(...deliveries.map((d) => d.deliveryId)),
      release: async (deliveries: readonly ClaimedDelivery[]) => void this.released.push(...deliveries.map((d) => d.deliveryId)),
      renew: async (delivery: ClaimedDelivery) => {
        this.renewed.push(delivery.deliveryId);
        return this.lost.has(delivery.deliveryId) ? null : { ...delivery, claimedUntil: new Date(Date.now() + 60_000), lease: "lease-2" };
      },
    } as unknown as DeliveryStore;
  }
}

/** Wakes of the endpoint as the test sends them; a linger ends when the test says so. */
class FakeWakes {
  flag = false;
  /** Round trips that consumed (or looked for) the flag. */
  flagsTaken = 0;
  registered = 0;
  released = 0;
  private lingering: ((woken: boolean) => void) | null = null;

  get isLingering(): boolean {
    return this.lingering !== null;
  }

  /** A wake published while the drain lingers; the waker sets the flag first, as DrainSignals.wake does. */
  wake(): void {
    this.flag = true;
    this.end(true);
  }

  /** The linger runs out. */
  lingerOver(): void {
    this.end(false);
  }

  private end(woken: boolean): void {
    const resolve = this.lingering;
    this.lingering = null;
    resolve?.(woken);
  }

  register(): DrainWakeHandle {
    this.registered += 1;
    return {
      woken: false,
      reset: () => undefined,
      wait: (_ms: number, cancel?: AbortSignal) =>
        new Promise<boolean>((resolve) => {
          this.lingering = resolve;
          cancel?.addEventListener("abort", () => this.end(false), { once: true });
        }),
      release: () => void (this.released += 1),
    };
  }

  async takeFlag(): Promise<boolean> {
    this.flagsTaken += 1;
    const was = this.flag;
    this.flag = false;
    return was;
  }
}

interface Fixture {
  deps: DrainDeps;
  store: FakeStore;
  wakes: FakeWakes;
  timers: { endpointId: string; at: Date }[];
  savedWindows: { size: number; reason: string | null }[];
  disables: DisableCause[];
  errors: unknown[];
}

/** A drain's dependencies around a fake store and fake signals; `lingerMs` is left to the fake wakes. */
function fixture(options: { window: number; concurrency?: number; retryDelays?: number[]; disableAfterFailures?: number }): Fixture {
  const store = new FakeStore();
  const wakes = new FakeWakes();
  const timers: Fixture["timers"] = [];
  const savedWindows: Fixture["savedWindows"] = [];
  const disables: DisableCause[] = [];
  const errors: unknown[] = [];
  const metrics = new WorkerMetrics(createServiceMetrics("drain-test").registry);
  const signals = {
    wakeAt: async (endpointId: string, at: Date) => void timers.push({ endpointId, at }),
    loadWindow: async () => null,
    saveWindow: async (_endpointId: string, state: { size: number; reason: string | null }) => void savedWindows.push({ size: state.size, reason: state.reason }),
  } as unknown as DrainSignals;
  const deps: DrainDeps = {
    store: store.asStore(),
    signals: { takeFlag: () => wakes.takeFlag() },
    wakes: { register: () => wakes.register() },
    lingerMs: 60_000,
    timers: new WakeTimers(signals),
    windows: new EndpointWindows(signals, options.window, metrics, (err) => errors.push(err)),
    attempts: new AttemptSlots(options.concurrency ?? 100),
    disabler: {
      disable: async (cause: DisableCause) => {
        disables.push(cause);
        return true;
      },
    } as unknown as EndpointDisabler,
    secrets: new SecretCache(createSecretBox(generateSecretBoxKey())),
    agents,
    metrics,
    timeoutMs: 10_000,
    retryDelays: options.retryDelays ?? [100],
    disableAfterFailures: options.disableAfterFailures ?? 50,
    retryAfterMaxMs: 60_000,
    random: () => 0,
    onError: (err) => errors.push(err),
  };
  return { deps, store, wakes, timers, savedWindows, disables, errors };
}

/** Starts a drain and, once it lingers, ends its linger (no wake came): resolves with how it ended. */
async function drainUntilIdle(f: Fixture, stop = new AbortController().signal) {
  const running = drainEndpoint(ENDPOINT, f.deps, stop);
  let ended = false;
  void running.finally(() => (ended = true));
  await eventually("the drain lingers or ends", () => f.wakes.isLingering || ended, { timeoutMs: 20_000, intervalMs: 5 });
  f.wakes.lingerOver();
  return running;
}

/**
 * A receiver that holds requests and answers them together once `group` are held: a drain whose
 * window is `group` only goes on if it really has `group` in flight. Records the most it saw at
 * once (held, not answered yet).
 */
function holdInGroups(group: number, status = 200) {
  const held: ServerResponse[] = [];
  const seen = { most: 0 };
  receiver.answerWith((_req, res) => {
    held.push(res);
    seen.most = Math.max(seen.most, held.length);
    if (held.length < group) return;
    // A little later, so that a request beyond the window would be seen held alongside these.
    setTimeout(() => {
      for (const r of held.splice(0)) {
        r.statusCode = status;
        r.end();
      }
    }, 20);
  });
  return seen;
}

describe("a drain", () => {
  it("fills the endpoint's window and never passes it, claims CLAIM_ROUNDS windows at a time, and ends once every attempt is recorded", async () => {
    const WINDOW = 3;
    const f = fixture({ window: WINDOW });
    const ids = f.store.add(8 * WINDOW);
    const seen = holdInGroups(WINDOW);

    expect(await drainUntilIdle(f)).toBe("drained");
    // Groups of WINDOW were answered only once WINDOW were held: the window was full every time.
    expect(seen.most).toBe(WINDOW);
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual(ids);
    // Every write is done when the drain resolves (a drain waits for its attempts' group commit).
    expect(f.store.recorded.map((a) => [a.attempt.deliveryId, a.becomes, a.failures])).toEqual(ids.map((id) => [id, "delivered", "reset"]));
    expect(f.store.claims.every((c) => c.limit === WINDOW * CLAIM_ROUNDS)).toBe(true);
    expect(f.store.claims.map((c) => c.got.length)).toEqual([12, 12, 0]);
    expect(f.wakes.released).toBe(f.wakes.registered);
    expect(f.errors).toEqual([]);
  });

  it("shares the process's DELIVERY_CONCURRENCY: a window wider than it is held to it", async () => {
    const f = fixture({ window: 10, concurrency: 2 });
    f.store.add(6);
    const seen = holdInGroups(2);
    expect(await drainUntilIdle(f)).toBe("drained");
    expect(seen.most).toBe(2);
    expect(f.store.recorded).toHaveLength(6);
  });

  it("records a retryable answer as pending with its due time, sets the endpoint's timer for it, and halves the window on a 503", async () => {
    const f = fixture({ window: 4, retryDelays: [5000] });
    const [id] = f.store.add(1);
    receiver.answerWith(503);
    const before = Date.now();
    expect(await drainUntilIdle(f)).toBe("drained");
    const [application] = f.store.recorded;
    expect(application).toMatchObject({ becomes: "pending", failures: "increment", run: 0, endpointId: ENDPOINT });
    expect(application!.attempt).toMatchObject({ deliveryId: id, responseStatus: 503, verdict: "retry", trigger: "initial", attemptNumber: 1 });
    expect(application!.dueAt!.getTime()).toBeGreaterThanOrEqual(before + 5000);
    expect(f.timers).toEqual([{ endpointId: ENDPOINT, at: application!.dueAt }]);
    // The receiver asked for less: the next drain (any replica) starts from the halved window.
    expect(f.savedWindows.at(-1)).toEqual({ size: 2, reason: "throttled" });
  });

  it("a retry is attempt n+1 of its delivery, with the retry trigger", async () => {
    const f = fixture({ window: 1 });
    f.store.add(1);
    f.store.pending[0] = { ...f.store.pending[0]!, runAttempts: 2, attemptCount: 2 };
    expect(await drainUntilIdle(f)).toBe("drained");
    expect(f.store.recorded[0]!.attempt).toMatchObject({ attemptNumber: 3, trigger: "retry", verdict: "delivered" });
    expect(receiver.received[0]!.headers["webhook-id"]).toBe(f.store.recorded[0]!.attempt.deliveryId);
  });

  it("renews a claim whose lease runs short before sending it, and sends nothing whose claim another drain took meanwhile", async () => {
    const f = fixture({ window: 2 });
    const fresh = f.store.add(1);
    const short = f.store.add(3, { leaseLeftMs: 1_000 });
    f.store.lost.add(short[1]!);
    expect(await drainUntilIdle(f)).toBe("drained");
    expect(f.store.renewed.sort()).toEqual([...short].sort());
    const sent = receiver.received.map((r) => r.headers["webhook-id"]);
    expect(sent.sort()).toEqual([fresh[0]!, short[0]!, short[2]!].sort());
    expect(f.store.recorded.map((a) => a.attempt.deliveryId).sort()).toEqual([fresh[0]!, short[0]!, short[2]!].sort());
  });

  it("stops at a 410: the endpoint is disabled once, and nothing more is sent", async () => {
    const f = fixture({ window: 1 });
    const [first] = f.store.add(5);
    // The 410 is known before its write commits: nothing starts meanwhile.
    f.store.writeMs = 50;
    receiver.answerWith(410);
    expect(await drainUntilIdle(f)).toBe("disabled");
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual([first]);
    expect(f.disables).toEqual([expect.objectContaining({ endpointId: ENDPOINT, reason: "gone", deliveryId: first, status: 410 })]);
    expect(f.store.recorded.map((a) => [a.attempt.deliveryId, a.becomes])).toEqual([[first, "failed"]]);
    // The claims are not given back: the disable skipped what was pending.
    expect(f.store.released).toEqual([]);
  });

  it("disables the endpoint for failures when the log says the count reached DISABLE_AFTER_FAILURES", async () => {
    const f = fixture({ window: 1, disableAfterFailures: 3, retryDelays: [] });
    f.store.failures = 1;
    f.store.add(6);
    receiver.answerWith(400);
    expect(await drainUntilIdle(f)).toBe("disabled");
    // Failures 2 and 3: the third consecutive one disables. The count is known once the log wrote
    // it, so one more attempt may have started meanwhile (window 1), never the rest.
    expect(receiver.received.length).toBeGreaterThanOrEqual(2);
    expect(receiver.received.length).toBeLessThanOrEqual(3);
    expect(f.disables).toEqual([expect.objectContaining({ reason: "failures", consecutiveFailures: 3, status: 400 })]);
  });

  it("skips what it claimed for an endpoint disabled since, sending nothing", async () => {
    const f = fixture({ window: 2 });
    const ids = f.store.add(3, { enabled: false });
    expect(await drainUntilIdle(f)).toBe("disabled");
    expect(f.store.skipped).toEqual(ids);
    expect(receiver.received).toHaveLength(0);
    expect(f.store.recorded).toHaveLength(0);
  });

  it("when the worker closes: lets the attempts in flight end and be recorded, starts no other, and gives back the rest of its claims", async () => {
    const f = fixture({ window: 2 });
    const ids = f.store.add(10);
    const held: ServerResponse[] = [];
    receiver.answerWith((_req, res) => void held.push(res));
    const stop = new AbortController();
    const running = drainEndpoint(ENDPOINT, f.deps, stop.signal);
    await eventually("the window is full", () => held.length === 2, { timeoutMs: 20_000, intervalMs: 5 });
    stop.abort();
    for (const res of held) {
      res.statusCode = 200;
      res.end();
    }
    expect(await running).toBe("stopped");
    const sent = ids.slice(0, 2);
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual(sent);
    expect(f.store.recorded.map((a) => a.attempt.deliveryId)).toEqual(sent);
    // Claimed 2 × CLAIM_ROUNDS: the unstarted ones go back at once (the next drain needs no lease to pass).
    expect(f.store.released).toEqual(ids.slice(2, 2 * CLAIM_ROUNDS));
    expect(f.store.pending.map((d) => d.deliveryId)).toEqual(ids.slice(2 * CLAIM_ROUNDS));
  });

  it("out of work, lingers: a wake meanwhile makes it claim again, and so does a flag found when the linger ends", async () => {
    const f = fixture({ window: 2 });
    const [a] = f.store.add(1);
    const running = drainEndpoint(ENDPOINT, f.deps, new AbortController().signal);
    let ended = false;
    void running.finally(() => (ended = true));
    await eventually("the drain sent a and lingers", () => f.wakes.isLingering && receiver.received.length === 1, { timeoutMs: 20_000, intervalMs: 5 });
    const [b] = f.store.add(1);
    f.wakes.wake();
    await eventually("the woken drain sent b and lingers again", () => f.wakes.isLingering && receiver.received.length === 2, { timeoutMs: 20_000, intervalMs: 5 });
    const [c] = f.store.add(1);
    // The published wake was lost; the flag was set.
    f.wakes.flag = true;
    f.wakes.lingerOver();
    await eventually("the flagged drain sent c and lingers again", () => f.wakes.isLingering && receiver.received.length === 3, { timeoutMs: 20_000, intervalMs: 5 });
    expect(ended).toBe(false);
    f.wakes.lingerOver();
    expect(await running).toBe("drained");
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual([a, b, c]);
    expect(f.store.recorded).toHaveLength(3);
    // One job, one registration for all of it.
    expect(f.wakes.registered).toBe(1);
    expect(f.wakes.released).toBe(1);
    // A published wake costs no round trip: the flag is read at the first look and when a linger
    // ends (found set once: c's, then the wake's was already consumed with it; then unset).
    expect(f.wakes.flagsTaken).toBe(3);
  });
});
