/**
 * Storing events and fanning them out: one transaction per batch of requests (those that arrived
 * while the previous one ran: {@link IngestService}) records the events (deduplicated on the
 * producer's id within the world), applies the new ones that name a person
 * to the member directory, and writes one delivery row per (new event, subscribed enabled
 * endpoint) carrying the final body bytes; after the commit, one job per delivery goes to the
 * deliveries queue in a single round trip.
 *
 * Why this is at least once, and heals itself: the rows commit before the jobs are added, so a
 * crash or a Redis failure in between leaves deliveries `pending` with no job, and the producer
 * gets an error (503, or a dropped connection). Producers retry until they get a 202. On the
 * retry every event is a duplicate, and the deliveries of duplicate events that are still
 * `pending` with `attempt_count = 0` (never attempted) are queued again. Their job id is the
 * deliveryId, so BullMQ ignores the ones whose job still exists: a job that was added, waits, or
 * runs is not doubled. The one window for a second POST is a job that completes and leaves Redis
 * between our read and our add; receivers deduplicate on deliveryId (spec: Delivery guarantees).
 */
import { DeliveryLog, newDeliveryId, newEventRowId, pgRunner, type IntakeEvent as LogEvent, type IntakeWorld, type MemberDirectory, type NewDelivery, type PgPool } from "@vw/db";
import { SUBSCRIPTION_OF_TYPE } from "@vw/contracts";
import { enqueueDeliveries, type DeliverJobData, type DeliverJobRequest, type DeliveryQueues } from "@vw/queues";
import { AppError, Coalescer, isDependencyUnavailable, traceMetadata, withSpan } from "@vw/service-kit";
import { buildEnvelope, worldReference } from "@vw/webhook-core";
import type { IntakeEvent, IntakeRequest } from "./events.schema.js";
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
  /** How long adding the jobs may take before the request fails with a 503. */
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

/** Largest intake batch, in events: concurrent requests are stored together up to this many. */
const MAX_BATCH_EVENTS = 1000;

/** How one request of a batch ended: its answer, or its own error (an unknown world, say). */
type RequestOutcome = { ok: true; result: IngestResult; jobs: boolean } | { ok: false; error: unknown };

/** A request's outcome once its batch committed; `enqueued` settles when its jobs are in Redis. */
type BatchedOutcome = RequestOutcome & { enqueued: Promise<void> | null };

/**
 * Takes validated events; the route calls {@link IngestService.ingest}. Its statements run on a
 * plain pg pool as named prepared statements, parsed and planned once per connection: Prisma
 * compiles its raw queries again on every call, which profiles of `pnpm bench delivery` showed as a
 * large share of the intake's CPU.
 *
 * Requests are stored in batches (group commit): those that arrive while an intake's transaction
 * runs are stored together in the next one, and their jobs added in one round trip. An intake
 * costs about the same in ingest and in PostgreSQL whatever its size (a transaction, two Redis
 * round trips, the HTTP exchange), so producers posting events one at a time would pay that for
 * every event; batched, that cost per request falls as the load rises
 * (docs/decisions/0008-ingest-intakes-in-batches.md). Each request still gets
 * its own answer: an unknown world fails only the request naming it, and a batch whose statement
 * fails for a reason other than an unavailable dependency is stored again request by request, so
 * that only the request that caused it fails.
 */
export class IngestService {
  private readonly playUrl: string;
  private readonly log: DeliveryLog;
  private readonly intakes: Coalescer<IntakeRequest, BatchedOutcome>;
  /** The trace context of each request while it is being stored (tracing on only). */
  private readonly traces = new WeakMap<IntakeRequest, string>();

  constructor(
    pool: PgPool,
    private readonly queue: DeliveryQueues,
    private readonly members: MemberDirectory,
    private readonly options: IngestServiceOptions,
  ) {
    this.playUrl = options.playUrl.replace(/\/+$/, "");
    this.log = new DeliveryLog(pgRunner(pool));
    // One transaction at a time: what arrives meanwhile waits for the next one, so batches grow
    // with the load. The slot is given back at the commit; the jobs are added meanwhile.
    this.intakes = new Coalescer((requests) => this.storeBatch(requests), {
      maxBatch: MAX_BATCH_EVENTS,
      maxInFlight: 1,
      weight: (request) => request.events.length,
    });
  }

  /**
   * Stores `events`, creates their deliveries and queues them; nothing is stored when a world is
   * unknown (404). Rejects with a dependency error (503) when the jobs cannot be added: the rows
   * are committed then, and the producer's retry queues them (see the file comment). The events and
   * deliveries are written by the DeliveryLog in one transaction, with those of the requests that
   * arrived meanwhile.
   */
  ingest(request: IntakeRequest): Promise<IngestResult> {
    return withSpan("event intake", { "events.count": request.events.length }, async (span) => {
      // The batch adds this request's jobs with other requests' ones: each job carries its own
      // request's trace, so its delivery continues this span (tracing on only).
      const trace = traceMetadata();
      if (trace !== undefined) this.traces.set(request, trace);
      const outcome = await this.intakes.submit(request);
      if (!outcome.ok) throw outcome.error;
      if (outcome.enqueued) await outcome.enqueued;
      span.setAttributes({ "events.accepted": outcome.result.accepted, "events.duplicates": outcome.result.duplicates, "webhook.deliveries": outcome.result.deliveries });
      return outcome.result;
    });
  }

  /** One batch: stored in one transaction, then its jobs added (not awaited here: see the constructor). */
  private async storeBatch(requests: readonly IntakeRequest[]): Promise<BatchedOutcome[]> {
    this.options.onBatch?.(requests.length);
    try {
      return this.enqueueAfter(await this.store(requests));
    } catch (err) {
      if (requests.length === 1 || isDependencyUnavailable(err)) throw err;
      // The statement failed on something in one request's data: each alone, so only that one fails.
      const outcomes: BatchedOutcome[] = [];
      for (const request of requests) {
        outcomes.push(
          await this.store([request]).then(
            (stored) => this.enqueueAfter(stored)[0] as BatchedOutcome,
            (error: unknown): BatchedOutcome => ({ ok: false, error, enqueued: null }),
          ),
        );
      }
      return outcomes;
    }
  }

  /** Starts adding a stored batch's jobs; the requests that made jobs wait for it, the others not. */
  private enqueueAfter(stored: { outcomes: RequestOutcome[]; jobs: DeliverJobRequest[] }): BatchedOutcome[] {
    const enqueued = stored.jobs.length === 0 ? null : this.enqueue(stored.jobs);
    // Awaited by the requests with jobs; this handler only keeps a batch without any from
    // reporting the rejection as unhandled.
    enqueued?.catch(() => undefined);
    return stored.outcomes.map((o) => ({ ...o, enqueued: o.ok && o.jobs ? enqueued : null }));
  }

  /** The batch's transaction: each request's outcome, and the jobs of all of them. */
  private async store(requests: readonly IntakeRequest[]): Promise<{ outcomes: RequestOutcome[]; jobs: DeliverJobRequest[] }> {
    const failed = new Map<number, unknown>();
    const stored = new Map<string, StoredEvent>();
    const intake = await this.log.intake(
      {
        events: requests.flatMap((r) => r.events.map((e) => ({ organizationSlug: e.organizationSlug, worldSlug: e.worldSlug, producerId: e.id }))),
        subscriptions: [...new Set(requests.flatMap((r) => r.events.flatMap((e) => SUBSCRIPTION_OF_TYPE[e.type] ?? [])))],
      },
      (worlds, createdAt) => {
        const byRef = new Map(worlds.map((w) => [`${w.organizationSlug}/${w.worldSlug}`, w]));
        // The first occurrence of an id in the batch is the event (its request's); later ones,
        // in the same request or a later one, are duplicates.
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
        const candidates = inLockOrder(firsts);
        for (const c of candidates) stored.set(c.rowId, c);
        return {
          events: candidates.map((c): LogEvent => ({ rowId: c.rowId, worldId: c.world.id, producerId: c.event.id, type: c.event.type, occurredAt: c.event.timestamp })),
          deliveries: this.planDeliveries(candidates, createdAt),
        };
      },
      // The member directory changes in the log's transaction: with the events, or not at all.
      // Duplicates were applied when first accepted.
      (fresh, tx) =>
        this.members.applyEvents(
          fresh.flatMap((f) => {
            const { event, world } = stored.get(f.rowId) as StoredEvent;
            return toMemberEvent(event, world.id) ?? [];
          }),
          tx,
        ),
    );
    const requestOf = (rowId: string) => (stored.get(rowId) as StoredEvent).request;
    const accepted = countPer(requests.length, intake.fresh.map((f) => requestOf(f.rowId)));
    const created = countPer(requests.length, intake.created.flatMap((d) => (d.event ? [requestOf(d.event.rowId)] : [])));
    const outcomes = requests.map((request, index): RequestOutcome => {
      if (failed.has(index)) return { ok: false, error: failed.get(index) };
      const deliveries = created[index] as number;
      const duplicates = request.events.length - (accepted[index] as number);
      // The deliveries queued again are those of known events, of whichever request named them.
      const jobs = deliveries > 0 || (duplicates > 0 && intake.unattempted.length > 0);
      return { ok: true, result: { accepted: accepted[index] as number, duplicates, deliveries }, jobs };
    });
    const jobs: DeliverJobRequest[] = [
      ...intake.created.map(
        (d): DeliverJobRequest => ({
          deliveryId: d.id,
          endpointId: d.endpointId,
          run: 0,
          traceMetadata: d.event ? this.traces.get(requests[requestOf(d.event.rowId)] as IntakeRequest) : undefined,
        }),
      ),
      ...intake.unattempted.map((d): DeliverJobData => ({ deliveryId: d.deliveryId, endpointId: d.endpointId, run: d.run })),
    ];
    return { outcomes, jobs };
  }

  /**
   * One delivery per (event, endpoint subscribed to the event type's subscription); each stores
   * the envelope every attempt sends. Its id is a UUIDv7 of the intake time, so the deliveries
   * share their event's partition day. Made for every event of the request before the log knows
   * which are new (it drops those of known events): a producer's retry pays for envelopes it does
   * not keep, so that an intake is two statements instead of four.
   */
  private planDeliveries(candidates: readonly StoredEvent[], createdAt: Date): NewDelivery[] {
    const rows: NewDelivery[] = [];
    for (const { event, rowId, world } of candidates) {
      const subscription = SUBSCRIPTION_OF_TYPE[event.type];
      if (subscription === null) continue;
      const worldRef = worldReference(this.playUrl, world.organizationSlug, world.worldSlug, world.customDomain);
      for (const endpoint of world.endpoints) {
        if (!endpoint.subscriptions.includes(subscription)) continue;
        const deliveryId = newDeliveryId(createdAt);
        // Legacy-format endpoints get the envelope too: the spec defines a legacy body only for member.connecting.
        const body = buildEnvelope({ deliveryId, apiVersion: endpoint.apiVersion, type: event.type, timestamp: event.timestamp, world: worldRef, data: event.data });
        rows.push({ id: deliveryId, endpointId: endpoint.id, worldId: world.id, type: event.type, body, event: { rowId, producerId: event.id } });
      }
    }
    return rows;
  }

  /** Adds the jobs in one round trip; a Redis that does not answer in time is a 503 like one that refuses. */
  private async enqueue(jobs: readonly DeliverJobRequest[]): Promise<void> {
    if (jobs.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new EnqueueTimeoutError(this.options.enqueueTimeoutMs)), this.options.enqueueTimeoutMs);
    });
    try {
      // A producer connection waits for Redis while it (re)connects; the timeout bounds that wait.
      await Promise.race([enqueueDeliveries(this.queue, jobs), timeout]);
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

/** Redis did not take the jobs in time. Named `TimeoutError`, which service-kit answers with a 503. */
export class EnqueueTimeoutError extends Error {
  constructor(ms: number) {
    super(`Redis did not take the delivery jobs within ${ms} ms`);
    this.name = "TimeoutError";
  }
}
