/**
 * Storing events and fanning them out: one transaction per batch of requests (those that arrived
 * while the previous one ran: {@link IngestService}) records the events (deduplicated on the
 * producer's id within the world), applies the new ones that name a person to the member
 * directory, and writes one pending delivery per (new event, subscribed enabled endpoint) carrying
 * its final bytes (fan-out.ts); after the commit, the endpoints that got deliveries are woken
 * (`DrainSignals.wake`: one script call per shard, the shards' calls in one write).
 *
 * Why this is at least once, and heals itself: PostgreSQL is the schedule of record, so once the
 * transaction committed every delivery is owed, whatever happens to the wake. A wake that fails
 * (Redis unavailable) answers the producer 503; its retry finds every event a duplicate and wakes
 * their endpoints again; should the producer never retry, the worker's reconciler wakes them
 * within RECONCILE_INTERVAL_MS.
 */
import { newEventRowId, type DeliveryLog, type IntakeEvent as LogEvent, type IntakeWorld, type MemberDirectory, type NewDelivery, type SqlRunner } from "@vw/db";
import type { DrainSignals } from "@vw/queues";
import { AppError, Coalescer, isDependencyUnavailable, traceMetadata, withSpan } from "@vw/service-kit";
import type { IntakeEvent, IntakeRequest } from "./events.schema.js";
import { endpointsFor, fanOut, type FanOutEvent } from "./fan-out.js";
import { toMemberEvent } from "./member-events.js";

/** What `POST /v1/events` answers. */
export interface IngestResult {
  /** Events seen for the first time. */
  accepted: number;
  /** Events whose id was already known in their world (or repeated within the request). */
  duplicates: number;
  /** Deliveries created for the accepted events. */
  deliveries: number;
}

/** Options of {@link IngestService}. */
export interface IngestServiceOptions {
  /** PLAY_URL, for the world's `url` in the envelope. */
  playUrl: string;
  /** How long waking the endpoints may take before the request fails with a 503. */
  enqueueTimeoutMs: number;
  /** Told the number of requests of every intake batch stored (or failed) together. */
  onBatch?: (requests: number) => void;
}

interface StoredEvent {
  event: IntakeEvent;
  rowId: string;
  world: IntakeWorld;
  /** The index in its batch of the request that named it first. */
  request: number;
}

/** One request's share of a stored batch, and the endpoints to wake for it. */
type StoredBatch = { outcomes: RequestOutcome[]; wake: string[] };

/** Largest intake batch, in events: concurrent requests are stored together up to this many. */
const MAX_BATCH_EVENTS = 1000;

/** How one request of a batch ended: its answer, or its own error (an unknown world, say); `wakes` when it has endpoints to wake. */
type RequestOutcome = { ok: true; result: IngestResult; wakes: boolean } | { ok: false; error: unknown };

/** A request's outcome once its batch committed; `enqueued` settles when its endpoints are woken. */
type BatchedOutcome = RequestOutcome & { enqueued: Promise<void> | null };

/**
 * Takes validated events; the route calls {@link IngestService.ingest}. The intake is a plain
 * transaction script over the delivery log (`resolveIntake`, the fan-out, `storeIntake`, the
 * member directory), on the process's pg pool as named prepared statements, parsed and planned
 * once per connection.
 *
 * Requests are stored in batches (group commit): those that arrive while an intake's transaction
 * runs are stored together in the next one, and their jobs added in one round trip. An intake
 * costs about the same in ingest and in PostgreSQL whatever its size (a transaction, a Redis
 * round trip, the HTTP exchange), so producers posting events one at a time would pay that for
 * every event; batched, that cost per request falls as the load rises
 * (docs/decisions/0008-ingest-intakes-in-batches.md). Each request still gets
 * its own answer: an unknown world fails only the request naming it, and a batch whose statement
 * fails for a reason other than an unavailable dependency is stored again request by request, so
 * that only the request that caused it fails.
 */
export class IngestService {
  private readonly playUrl: string;
  private readonly intakes: Coalescer<IntakeRequest, BatchedOutcome>;
  /** The trace context of each request while it is being stored (tracing on only). */
  private readonly traces = new WeakMap<IntakeRequest, string>();

  constructor(
    private readonly log: DeliveryLog,
    private readonly signals: Pick<DrainSignals, "wake">,
    private readonly members: MemberDirectory,
    private readonly options: IngestServiceOptions,
  ) {
    this.playUrl = options.playUrl.replace(/\/+$/, "");
    // One transaction at a time: what arrives meanwhile waits for the next one, so batches grow
    // with the load. The slot is given back at the commit; the endpoints are woken meanwhile.
    this.intakes = new Coalescer((requests) => this.storeBatch(requests), {
      maxBatch: MAX_BATCH_EVENTS,
      maxInFlight: 1,
      weight: (request) => request.events.length,
    });
  }

  /**
   * Stores `events`, creates their deliveries and wakes their endpoints; nothing is stored when a
   * world is unknown (404). Rejects with a dependency error (503) when the endpoints cannot be
   * woken: the deliveries are committed then, and the producer's retry wakes them (see the file
   * comment). The events and deliveries are written in one transaction, with those of the
   * requests that arrived meanwhile.
   */
  ingest(request: IntakeRequest): Promise<IngestResult> {
    return withSpan("event intake", { "events.count": request.events.length }, async (span) => {
      // The batch stores this request's deliveries with other requests' ones: each carries its own
      // request's trace, so its attempts continue this span (tracing on only).
      const trace = traceMetadata();
      if (trace !== undefined) this.traces.set(request, trace);
      const outcome = await this.intakes.submit(request);
      if (!outcome.ok) throw outcome.error;
      if (outcome.enqueued) await outcome.enqueued;
      span.setAttributes({ "events.accepted": outcome.result.accepted, "events.duplicates": outcome.result.duplicates, "webhook.deliveries": outcome.result.deliveries });
      return outcome.result;
    });
  }

  /** One batch: stored in one transaction, then its endpoints woken (not awaited here: see the constructor). */
  private async storeBatch(requests: readonly IntakeRequest[]): Promise<BatchedOutcome[]> {
    this.options.onBatch?.(requests.length);
    try {
      return this.wakeAfter(await this.store(requests));
    } catch (err) {
      if (requests.length === 1 || isDependencyUnavailable(err)) throw err;
      // The statement failed on something in one request's data: each alone, so only that one fails.
      const outcomes: BatchedOutcome[] = [];
      for (const request of requests) {
        outcomes.push(
          await this.store([request]).then(
            (stored) => this.wakeAfter(stored)[0] as BatchedOutcome,
            (error: unknown): BatchedOutcome => ({ ok: false, error, enqueued: null }),
          ),
        );
      }
      return outcomes;
    }
  }

  /** Starts waking a stored batch's endpoints; the requests that have some wait for it, the others not. */
  private wakeAfter(stored: StoredBatch): BatchedOutcome[] {
    const woken = stored.wake.length === 0 ? null : this.wake(stored.wake);
    // Awaited by the requests with endpoints to wake; this handler only keeps a batch without any
    // from reporting the rejection as unhandled.
    woken?.catch(() => undefined);
    return stored.outcomes.map((o) => ({ ...o, enqueued: o.ok && o.wakes ? woken : null }));
  }

  /**
   * The batch's transaction script: the worlds and their endpoints (with the events' locks), the
   * fan-out, the events and deliveries, the member directory's changes; each request's outcome,
   * and the endpoints to wake.
   */
  private async store(requests: readonly IntakeRequest[]): Promise<StoredBatch> {
    const createdAt = new Date();
    const failed = new Map<number, unknown>();
    const { fresh, created, candidates } = await this.log.transaction(async (tx) => {
      const worlds = await this.log.resolveIntake(
        requests.flatMap((r) => r.events.map((e) => ({ organizationSlug: e.organizationSlug, worldSlug: e.worldSlug, producerId: e.id }))),
        tx,
      );
      const candidates = this.candidates(requests, worlds, failed);
      const events = candidates.map((c): LogEvent => ({ rowId: c.rowId, worldId: c.world.id, producerId: c.event.id, type: c.event.type, occurredAt: c.event.timestamp }));
      const deliveries = fanOut(candidates.map((c) => this.fanOutEvent(c, requests)), createdAt, this.playUrl);
      const stored = await this.log.storeIntake({ events, deliveries }, createdAt, tx);
      // The member directory changes in the log's transaction: with the events, or not at all.
      // Duplicates were applied when first accepted.
      await this.applyMembers(stored.fresh, candidates, tx);
      return { fresh: new Set(stored.fresh.map((f) => f.rowId)), created: stored.created, candidates };
    });
    return this.outcomes(requests, failed, candidates, fresh, created);
  }

  /** The first occurrence of each (world, id) in the batch, in lock order; the requests naming an unknown world fail alone. */
  private candidates(requests: readonly IntakeRequest[], worlds: readonly IntakeWorld[], failed: Map<number, unknown>): StoredEvent[] {
    const byRef = new Map(worlds.map((w) => [`${w.organizationSlug}/${w.worldSlug}`, w]));
    // The first occurrence of an id in the batch is the event (its request's); later ones, in the
    // same request or a later one, are duplicates.
    const firsts = new Map<string, StoredEvent>();
    requests.forEach((request, index) => {
      const unknown = unknownWorlds(request, byRef);
      if (unknown) return void failed.set(index, unknown);
      for (const event of request.events) {
        const world = byRef.get(event.world) as IntakeWorld;
        const key = eventKey(world.id, event.id);
        if (!firsts.has(key)) firsts.set(key, { event, rowId: newEventRowId(), world, request: index });
      }
    });
    return inLockOrder(firsts);
  }

  private fanOutEvent(c: StoredEvent, requests: readonly IntakeRequest[]): FanOutEvent {
    const trace = this.traces.get(requests[c.request] as IntakeRequest);
    return { rowId: c.rowId, producerId: c.event.id, type: c.event.type, timestamp: c.event.timestamp, data: c.event.data, world: c.world, ...(trace === undefined ? {} : { trace }) };
  }

  private async applyMembers(fresh: readonly LogEvent[], candidates: readonly StoredEvent[], tx: SqlRunner): Promise<void> {
    if (fresh.length === 0) return;
    const byRow = new Map(candidates.map((c) => [c.rowId, c]));
    const changes = fresh.flatMap((f) => {
      const { event, world } = byRow.get(f.rowId) as StoredEvent;
      return toMemberEvent(event, world.id) ?? [];
    });
    if (changes.length > 0) await this.members.applyEvents(changes, tx);
  }

  /**
   * Each request's answer, and the endpoints to wake: those that got deliveries, and for a
   * request with duplicates, the endpoints its known events' types go to (a producer retrying after
   * a 503 whose deliveries are committed but whose wake failed).
   */
  private outcomes(requests: readonly IntakeRequest[], failed: ReadonlyMap<number, unknown>, candidates: readonly StoredEvent[], fresh: ReadonlySet<string>, created: readonly NewDelivery[]): StoredBatch {
    const requestOfRow = new Map(candidates.map((c) => [c.rowId, c.request]));
    const accepted = countPer(requests.length, [...fresh].map((rowId) => requestOfRow.get(rowId) as number));
    const deliveries = countPer(requests.length, created.flatMap((d) => (d.event ? [requestOfRow.get(d.event.rowId) as number] : [])));
    const wake = new Set(created.map((d) => d.endpointId));
    const outcomes = requests.map((request, index): RequestOutcome => {
      if (failed.has(index)) return { ok: false, error: failed.get(index) };
      const duplicates = request.events.length - (accepted[index] as number);
      let wakes = (deliveries[index] as number) > 0;
      if (duplicates > 0) {
        for (const c of candidates) {
          if (c.request !== index || fresh.has(c.rowId)) continue;
          for (const endpoint of endpointsFor(c.world, c.event.type)) wake.add(endpoint.id);
          wakes = wakes || endpointsFor(c.world, c.event.type).length > 0;
        }
      }
      return { ok: true, result: { accepted: accepted[index] as number, duplicates, deliveries: deliveries[index] as number }, wakes };
    });
    return { outcomes, wake: [...wake] };
  }

  /** Wakes the endpoints; a Redis that does not answer in time is a 503 like one that refuses. */
  private async wake(endpointIds: readonly string[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new EnqueueTimeoutError(this.options.enqueueTimeoutMs)), this.options.enqueueTimeoutMs);
    });
    try {
      // A producer connection waits for Redis while it (re)connects; the timeout bounds that wait.
      await Promise.race([this.signals.wake(endpointIds), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The 404 of a request naming a world the log did not find (`byRef`: the worlds found, by
 * `<org>/<world>`), naming every unknown world and where each is named; null when all are known.
 * Nothing of that request is stored. A disabled endpoint is not among a world's endpoints and never
 * gets these events (spec: no catch-up).
 */
function unknownWorlds({ form, events }: IntakeRequest, byRef: ReadonlyMap<string, IntakeWorld>): AppError | null {
  const unknown = [...new Set(events.map((e) => e.world))].filter((ref) => !byRef.has(ref));
  if (unknown.length === 0) return null;
  const errors = events.flatMap((event, index) =>
    byRef.has(event.world) ? [] : [{ pointer: form === "single" ? "/world" : `/events/${index}/world`, detail: "names no known world" }],
  );
  return new AppError(404, "unknown-world", `No such world: ${unknown.join(", ")}. Nothing was accepted.`, { worlds: unknown, errors });
}

/** How many of `indexes` name each of `0..n-1`. */
function countPer(n: number, indexes: readonly number[]): number[] {
  const counts = new Array<number>(n).fill(0);
  for (const i of indexes) counts[i] = (counts[i] as number) + 1;
  return counts;
}

/** The deduplication key of an event: its world and the producer's id. */
export const eventKey = (worldId: string, producerId: string) => `${worldId}\u0000${producerId}`;

/**
 * The values of `byKey` sorted by key. Inserting events in one order in every request makes
 * concurrent requests that share ids wait on each other's unique-index entries in the same
 * order, instead of each holding one the other needs (a deadlock PostgreSQL resolves by failing
 * a request).
 */
export function inLockOrder<T>(byKey: ReadonlyMap<string, T>): T[] {
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, value]) => value);
}

/** Redis did not take the wakes in time. Named `TimeoutError`, which service-kit answers with a 503. */
export class EnqueueTimeoutError extends Error {
  constructor(ms: number) {
    super(`Redis did not take the endpoints' wakes within ${ms} ms`);
    this.name = "TimeoutError";
  }
}
