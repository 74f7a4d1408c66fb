/**
 * One endpoint's drain: what a worker does with the endpoint's drain job (`@vw/queues`
 * drain-signals.ts). It claims the endpoint's due deliveries from PostgreSQL a few windows at a
 * time, sends each within the endpoint's window of attempts in flight (endpoint-window.ts) and its
 * throttle, and records every attempt with the fate `decideFate` gave it (one pure function decides;
 * this applies). Out of work, it lingers for DRAIN_LINGER_MS: a wake of its endpoint meanwhile
 * (published by the waker) sets it going again without a new job. It ends once it lingered in
 * vain and nothing was flagged since, after its attempts' writes committed.
 *
 * A drain is the only sender of its endpoint across every replica (one job id per endpoint), so
 * the window and the throttle are its own; PostgreSQL's claims keep any second drain that may
 * exist meanwhile (a shard layout changing, a lost job) from sending what this one holds.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { ClaimedDelivery } from "@vw/db";
import type { DrainSignals, DrainWakeHandle, DrainWakes } from "@vw/queues";
import { traceDeliveryAttempt } from "@vw/service-kit";
import { decideFate, disabledForFailures, sendAttempt, type AttemptRecord, type DeliveryAgents, type DeliveryKind, type Fate, type SecretCache } from "@vw/webhook-core";
import type { AttemptSlots } from "./attempt-slots.js";
import type { DeliveryStore } from "./delivery-store.js";
import type { EndpointDisabler } from "./endpoint-disabler.js";
import type { EndpointWindow } from "./endpoint-window.js";
import type { WorkerMetrics } from "./metrics.js";
import type { WakeTimers } from "./wake-timers.js";
import type { EndpointWindows } from "./windows.js";

/** Deliveries claimed at a time, per slot of the window: enough to keep the window full between claims. */
export const CLAIM_ROUNDS = 4;

/** Everything a drain needs; `compose.ts` builds the live ones, tests their own. */
export interface DrainDeps {
  store: DeliveryStore;
  signals: Pick<DrainSignals, "takeFlag">;
  /** The wakes published for lingering drains (this process's subscriber). */
  wakes: Pick<DrainWakes, "register">;
  /** DRAIN_LINGER_MS: how long a drain out of work waits for more before its job ends. */
  lingerMs: number;
  timers: WakeTimers;
  windows: EndpointWindows;
  /** The process's attempts in flight (DELIVERY_CONCURRENCY): held from the start of a POST until its attempt is logged. */
  attempts: AttemptSlots;
  disabler: EndpointDisabler;
  secrets: SecretCache;
  agents: DeliveryAgents;
  metrics: WorkerMetrics;
  timeoutMs: number;
  retryDelays: readonly number[];
  disableAfterFailures: number;
  /** RETRY_AFTER_MAX_S in ms. */
  retryAfterMaxMs: number;
  random?: () => number;
  /** Wall clock of attempts (the `webhook-timestamp`); the system's unless given. */
  now?: () => Date;
  /**
   * What an attempt's error keeps off the delivery log, for the server's log only: the address a
   * policy refusal was about, or what the resolver said of a host that had no address.
   */
  onHiddenDetail?: (info: { endpointId: string; deliveryId: string; kind: string; detail: string }) => void;
  /** A write or a wake that failed after its attempt (logged; the claim's lease brings the delivery back). */
  onError: (err: unknown, what: string) => void;
}

/** How a drain ended: nothing left; the worker is closing; the endpoint was disabled or deleted. */
export type DrainEnd = "drained" | "stopped" | "disabled";

/** Drains `endpointId` (see the file comment); `stop` aborts when the worker closes. */
export async function drainEndpoint(endpointId: string, deps: DrainDeps, stop: AbortSignal): Promise<DrainEnd> {
  const wakes = deps.wakes.register(endpointId);
  try {
    return await new Drain(endpointId, deps, stop, await deps.windows.open(endpointId), wakes).run();
  } finally {
    wakes.release();
  }
}

class Drain {
  private readonly queue: ClaimedDelivery[] = [];
  private readonly running = new Set<Promise<void>>();
  private readonly writing = new Set<Promise<void>>();
  private more = true;
  private disabled = false;
  private nextStartAt = 0;

  constructor(
    private readonly endpointId: string,
    private readonly deps: DrainDeps,
    private readonly stop: AbortSignal,
    private readonly window: EndpointWindow,
    private readonly wakes: DrainWakeHandle,
  ) {}

  async run(): Promise<DrainEnd> {
    await this.look();
    try {
      for (;;) {
        while (this.queue.length > 0 && this.running.size < this.window.size && !this.stop.aborted && !this.disabled) {
          await this.start(this.queue.shift() as ClaimedDelivery);
        }
        if (this.stop.aborted) return "stopped";
        if (this.disabled) return "disabled";
        if (this.queue.length < this.window.size && this.more) {
          await this.claim();
          continue;
        }
        if (this.running.size > 0) {
          await Promise.race(this.running);
          continue;
        }
        if (this.queue.length > 0) continue;
        // Nothing claimed, nothing in flight: a little while for more, then done, unless work was
        // flagged since the last look (a published wake that got lost). A published wake's flag is
        // left set: it costs a round trip per wake to consume, and a flag still set when the
        // lingering ends only makes one more look before the drain ends.
        if (await this.wakes.wait(this.deps.lingerMs, this.stop)) {
          this.lookAgain();
          continue;
        }
        if (await this.deps.signals.takeFlag(this.endpointId)) {
          this.lookAgain();
          continue;
        }
        return this.stop.aborted ? "stopped" : "drained";
      }
    } finally {
      await Promise.allSettled(this.running);
      await Promise.allSettled(this.writing);
      if (this.queue.length > 0 && !this.disabled) await this.deps.store.release(this.queue).catch((err: unknown) => this.deps.onError(err, "giving claims back"));
      if (this.window.slowed) this.deps.windows.save(this.endpointId, this.window);
    }
  }

  /**
   * The drain's first look for work: forgets the wakes so far and consumes the endpoint's flag, so
   * that whatever made work due before the next claim is seen by it, and whatever comes after
   * wakes the drain again (its wake, or its flag when the lingering ends).
   */
  private async look(): Promise<void> {
    this.lookAgain();
    await this.deps.signals.takeFlag(this.endpointId);
  }

  /** A later look, after a wake or a flag just consumed: forgets the wakes so far. */
  private lookAgain(): void {
    this.wakes.reset();
    this.more = true;
  }

  /** Claims the next deliveries; one that comes up short ends this look. */
  private async claim(): Promise<void> {
    const want = this.window.size * CLAIM_ROUNDS;
    const got = await this.deps.store.claim(this.endpointId, want);
    this.more = got.length >= want;
    const off = got.filter((d) => !d.endpoint.enabled);
    if (off.length > 0) {
      // Disabled since the events came (its disable skips what is pending; these were claimed in between).
      await this.deps.store.skip(off);
      this.deps.metrics.skipped.inc(off.length);
      this.disabled = true;
      return;
    }
    this.queue.push(...got);
  }

  /** Starts one attempt once the throttle and the process allow it. */
  private async start(delivery: ClaimedDelivery): Promise<void> {
    const rate = delivery.endpoint.rateLimitPerSecond;
    if (rate !== null && rate > 0) {
      const t = Date.now();
      const startAt = Math.max(t, this.nextStartAt);
      this.nextStartAt = startAt + 1000 / rate;
      if (startAt > t) await sleep(startAt - t);
    }
    const release = await this.deps.attempts.take();
    // A claim whose lease runs short (it waited behind the throttle, or the process stalled) is
    // renewed before it is sent; one that expired and was taken again is the other drain's.
    if (delivery.claimedUntil.getTime() - Date.now() < this.deps.timeoutMs * 2) {
      const renewed = await this.deps.store.renew(delivery).catch((err: unknown) => {
        this.deps.onError(err, "renewing a claim");
        return null;
      });
      if (renewed === null) {
        release();
        this.more = true;
        return;
      }
      delivery = renewed;
    }
    this.window.started();
    const attempt: Promise<void> = this.attempt(delivery, release)
      .catch((err: unknown) => {
        release();
        this.deps.onError(err, "an attempt");
      })
      .finally(() => this.running.delete(attempt));
    this.running.add(attempt);
  }

  /**
   * Sends one delivery and hands its fate to the log; resolves when the POST has its answer. The
   * process's slot (`release`) is held until the attempt is logged: a worker killed meanwhile sends
   * it again, so DELIVERY_CONCURRENCY bounds the copies a crash can cause.
   */
  private async attempt(delivery: ClaimedDelivery, release: () => void): Promise<void> {
    const deps = this.deps;
    const kind: DeliveryKind = delivery.test ? "test" : delivery.run > 0 ? "replay" : "ordinary";
    const trigger = delivery.runAttempts > 0 ? "retry" : kind === "ordinary" ? "initial" : "replay";
    const attemptNumber = delivery.attemptCount + 1;
    // The attempt's span continues the delivery's stored trace (its intake's); what the answer
    // leads to (the write, a disable, a retry's timer) runs in its context, so it logs with the
    // delivery's trace ids.
    await traceDeliveryAttempt(
      delivery.endpoint.url,
      { deliveryId: delivery.deliveryId, endpointId: this.endpointId, trigger, attemptNumber },
      delivery.trace ?? undefined,
      () =>
        sendAttempt({
          url: delivery.endpoint.url,
          deliveryId: delivery.deliveryId,
          attemptNumber,
          trigger,
          body: delivery.body,
          secret: deps.secrets.secretOf(this.endpointId, delivery.endpoint.secretSealed),
          headers: deps.secrets.headersOf(this.endpointId, delivery.endpoint.headersSealed),
          agents: deps.agents,
          timeoutMs: deps.timeoutMs,
          now: deps.now,
        }),
      async (record) => {
        const fate = decideFate({ kind, runAttempts: delivery.runAttempts }, record, {
          retryDelays: deps.retryDelays,
          disableAfterFailures: deps.disableAfterFailures,
          retryAfterMaxMs: deps.retryAfterMaxMs,
          now: Date.now(),
          random: deps.random ?? Math.random,
        });
        // A 410 means no more deliveries wanted: nothing else starts while its disable is written.
        if (fate.disable !== null) this.disabled = true;
        if (this.window.apply(fate.window)) deps.windows.save(this.endpointId, this.window);
        this.observe(delivery, record);
        const write: Promise<void> = this.apply(delivery, record, fate, release)
          .catch((err: unknown) => deps.onError(err, "recording an attempt"))
          .finally(() => {
            release();
            this.writing.delete(write);
          });
        this.writing.add(write);
      },
    );
  }

  /**
   * Records the attempt with its fate (then gives the process's slot back: `release`), then disables
   * the endpoint or sets the retry's timer as the fate says.
   */
  private async apply(delivery: ClaimedDelivery, record: AttemptRecord, fate: Fate, release: () => void): Promise<void> {
    const failures = await this.deps.store
      .record({
        attempt: record,
        endpointId: this.endpointId,
        deliveryCreatedAt: delivery.createdAt,
        becomes: fate.becomes,
        dueAt: fate.dueAt,
        waitReason: fate.waitReason,
        run: delivery.run,
        failures: fate.failures,
      })
      .finally(release);
    const reason = fate.disable ?? (disabledForFailures(fate, failures) ? "failures" : null);
    if (reason !== null) {
      this.disabled = true;
      const disabled = await this.deps.disabler.disable({
        endpointId: this.endpointId,
        reason,
        deliveryId: delivery.deliveryId,
        status: record.responseStatus,
        error: record.error,
        consecutiveFailures: failures ?? 0,
      });
      if (disabled) this.deps.metrics.endpointsDisabled.inc({ reason });
      return;
    }
    if (fate.becomes === "pending" && fate.dueAt !== null) await this.deps.timers.wakeAt(this.endpointId, fate.dueAt);
  }

  private observe(delivery: ClaimedDelivery, record: AttemptRecord): void {
    const deps = this.deps;
    if (record.errorDetail !== undefined && record.errorKind !== null) {
      deps.onHiddenDetail?.({ endpointId: this.endpointId, deliveryId: delivery.deliveryId, kind: record.errorKind, detail: record.errorDetail });
    }
    deps.metrics.observeAttempt(record.verdict, record.durationMs);
    // Lag is the pipeline's promise to receivers; a replay or a Test says nothing about it.
    if (delivery.test || delivery.run > 0) return;
    const lag = Math.max(0, (record.startedAt.getTime() - delivery.createdAt.getTime()) / 1000);
    if (delivery.attemptCount === 0) deps.metrics.firstAttemptLag.observe(lag);
    if (record.verdict === "delivered") deps.metrics.successLag.observe(lag + record.durationMs / 1000);
  }
}
