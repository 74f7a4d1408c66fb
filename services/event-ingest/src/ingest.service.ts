/**
 * Storing events and fanning them out: one transaction per request records the events
 * (deduplicated on the producer's id within the world), applies the new ones that name a person
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
import { randomUUID } from "node:crypto";
import type { Queue } from "bullmq";
import { Prisma, prismaSql, type MemberDirectory, type MemberEvent, type PrismaClient } from "@vw/db";
import { SUBSCRIPTION_OF_TYPE } from "@vw/contracts";
import { enqueueDeliveries, type DeliverJobData } from "@vw/queues";
import { AppError } from "@vw/service-kit";
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
}

interface WorldRow {
  id: string;
  world_slug: string;
  org_slug: string;
  custom_domain: string | null;
}

interface EndpointRow {
  id: string;
  world_id: string;
  api_version: string;
  subscriptions: string[];
}

interface DeliveryRow {
  id: string;
  endpointId: string;
  worldId: string;
  eventId: string;
  type: string;
  body: Buffer;
}

interface StoredEvent {
  event: IntakeEvent;
  rowId: string;
  world: WorldRow;
}

/** Interactive transaction limits: a 500-event request with many endpoints writes thousands of rows. */
const TRANSACTION_OPTIONS = { maxWait: 10_000, timeout: 30_000 } as const;

/** Takes validated events; the route calls {@link IngestService.ingest}. */
export class IngestService {
  private readonly playUrl: string;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly queue: Queue,
    private readonly members: MemberDirectory,
    private readonly options: IngestServiceOptions,
  ) {
    this.playUrl = options.playUrl.replace(/\/+$/, "");
  }

  /**
   * Stores `events`, creates their deliveries and queues them; nothing is stored when a world is
   * unknown (404). Rejects with a dependency error (503) when the jobs cannot be added: the rows
   * are committed then, and the producer's retry queues them (see the file comment).
   */
  async ingest(request: IntakeRequest): Promise<IngestResult> {
    const { result, jobs } = await this.prisma.$transaction((tx) => this.store(tx, request), TRANSACTION_OPTIONS);
    await this.enqueue(jobs);
    return result;
  }

  private async store(tx: Prisma.TransactionClient, request: IntakeRequest): Promise<{ result: IngestResult; jobs: DeliverJobData[] }> {
    const { events } = request;
    const worlds = await this.resolveWorlds(tx, request);

    // The first occurrence of an id within the request is the event; later ones are duplicates.
    const firsts = new Map<string, StoredEvent>();
    for (const event of events) {
      const world = worlds.get(event.world) as WorldRow;
      const key = eventKey(world.id, event.id);
      if (!firsts.has(key)) firsts.set(key, { event, rowId: randomUUID(), world });
    }
    const candidates = inLockOrder(firsts);

    const inserted = await tx.$queryRaw<{ id: string }[]>`
      INSERT INTO webhook_events (id, world_id, producer_id, type, occurred_at)
      SELECT * FROM unnest(
        ${candidates.map((c) => c.rowId)}::uuid[], ${candidates.map((c) => c.world.id)}::uuid[],
        ${candidates.map((c) => c.event.id)}::text[], ${candidates.map((c) => c.event.type)}::text[],
        ${candidates.map((c) => c.event.timestamp)}::timestamptz[])
      ON CONFLICT (world_id, producer_id) DO NOTHING
      RETURNING id`;
    const insertedIds = new Set(inserted.map((row) => row.id));
    const fresh = candidates.filter((c) => insertedIds.has(c.rowId));
    const known = candidates.filter((c) => !insertedIds.has(c.rowId));

    // The directory changes in the same transaction: with the events, or not at all. Duplicates were
    // applied when first accepted.
    const memberEvents = fresh.flatMap((f) => toMemberEvent(f.event, f.world.id) ?? []) satisfies MemberEvent[];
    await this.members.applyEvents(memberEvents, prismaSql(tx));
    const created = await this.createDeliveries(tx, fresh);
    const repaired = await this.neverAttemptedDeliveries(tx, known);
    return {
      result: { accepted: fresh.length, duplicates: events.length - fresh.length, deliveries: created.length },
      jobs: [...created, ...repaired],
    };
  }

  /** The worlds named by `events`, by `<org>/<world>`; 404 naming every unknown one. */
  private async resolveWorlds(tx: Prisma.TransactionClient, { form, events }: IntakeRequest): Promise<Map<string, WorldRow>> {
    const refs = new Map<string, IntakeEvent>();
    for (const event of events) if (!refs.has(event.world)) refs.set(event.world, event);
    const wanted = [...refs.values()];
    const rows = await tx.$queryRaw<WorldRow[]>`
      SELECT w.id, w.slug AS world_slug, o.slug AS org_slug, w.custom_domain
      FROM unnest(${wanted.map((e) => e.organizationSlug)}::text[], ${wanted.map((e) => e.worldSlug)}::text[]) AS r(org, world)
      JOIN organizations o ON o.slug = r.org
      JOIN worlds w ON w.organization_id = o.id AND w.slug = r.world`;
    const found = new Map(rows.map((row) => [`${row.org_slug}/${row.world_slug}`, row]));
    const unknown = [...refs.keys()].filter((ref) => !found.has(ref));
    if (unknown.length > 0) {
      const errors = events.flatMap((event, index) =>
        found.has(event.world) ? [] : [{ pointer: form === "single" ? "/world" : `/events/${index}/world`, detail: "names no known world" }],
      );
      throw new AppError(404, "unknown-world", `No such world: ${unknown.join(", ")}. Nothing was accepted.`, { worlds: unknown, errors });
    }
    return found;
  }

  /**
   * One delivery per (event, endpoint) for the world's endpoints that are enabled now and
   * subscribed to the event type's subscription; each stores the envelope every attempt sends.
   */
  private async createDeliveries(tx: Prisma.TransactionClient, fresh: readonly StoredEvent[]): Promise<DeliverJobData[]> {
    if (fresh.length === 0) return [];
    const worldIds = [...new Set(fresh.map((f) => f.world.id))];
    const subscriptions = [...new Set(fresh.map((f) => SUBSCRIPTION_OF_TYPE[f.event.type]))];
    // A disabled endpoint is left out here and never gets these events (spec: no catch-up).
    const endpoints = await tx.$queryRaw<EndpointRow[]>`
      SELECT id, world_id, api_version, subscriptions FROM webhook_endpoints
      WHERE world_id = ANY(${worldIds}::uuid[]) AND enabled = true AND subscriptions && ${subscriptions}::text[]`;
    const endpointsOf = new Map<string, EndpointRow[]>();
    for (const endpoint of endpoints) {
      const list = endpointsOf.get(endpoint.world_id) ?? [];
      list.push(endpoint);
      endpointsOf.set(endpoint.world_id, list);
    }

    const rows: DeliveryRow[] = [];
    const jobs: DeliverJobData[] = [];
    for (const { event, rowId, world } of fresh) {
      const subscription = SUBSCRIPTION_OF_TYPE[event.type];
      if (subscription === null) continue;
      const worldRef = worldReference(this.playUrl, world.org_slug, world.world_slug, world.custom_domain);
      for (const endpoint of endpointsOf.get(world.id) ?? []) {
        if (!endpoint.subscriptions.includes(subscription)) continue;
        const deliveryId = randomUUID();
        // Legacy-format endpoints get the envelope too: the spec defines a legacy body only for member.connecting.
        const body = buildEnvelope({ deliveryId, apiVersion: endpoint.api_version, type: event.type, timestamp: event.timestamp, world: worldRef, data: event.data });
        rows.push({ id: deliveryId, endpointId: endpoint.id, worldId: world.id, eventId: rowId, type: event.type, body });
        jobs.push({ deliveryId, endpointId: endpoint.id, trigger: "initial" });
      }
    }
    await insertDeliveries(tx, rows);
    return jobs;
  }

  /** Deliveries of already-known events that were stored but never attempted: their job may be lost. */
  private async neverAttemptedDeliveries(tx: Prisma.TransactionClient, known: readonly StoredEvent[]): Promise<DeliverJobData[]> {
    if (known.length === 0) return [];
    const rows = await tx.$queryRaw<{ id: string; endpoint_id: string }[]>`
      SELECT d.id, d.endpoint_id
      FROM unnest(${known.map((k) => k.world.id)}::uuid[], ${known.map((k) => k.event.id)}::text[]) AS k(world_id, producer_id)
      JOIN webhook_events e ON e.world_id = k.world_id AND e.producer_id = k.producer_id
      JOIN webhook_deliveries d ON d.event_id = e.id
      WHERE d.status = 'pending' AND d.attempt_count = 0 AND d.test = false`;
    return rows.map((row) => ({ deliveryId: row.id, endpointId: row.endpoint_id, trigger: "initial" }));
  }

  /** Adds the jobs in one round trip; a Redis that does not answer in time is a 503 like one that refuses. */
  private async enqueue(jobs: readonly DeliverJobData[]): Promise<void> {
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

/**
 * Inserts pending deliveries in one statement, whatever their number: a column array per field
 * through `unnest` (Prisma's createMany was five times slower here, and splits large batches).
 * Bodies travel as base64 text and are decoded by PostgreSQL, so the stored bytes are exactly
 * the envelope's, whatever the database's text encoding.
 */
async function insertDeliveries(tx: Prisma.TransactionClient, rows: readonly DeliveryRow[]): Promise<void> {
  if (rows.length === 0) return;
  await tx.$executeRaw`
    INSERT INTO webhook_deliveries (id, endpoint_id, world_id, event_id, type, status, body)
    SELECT id, endpoint_id, world_id, event_id, type, 'pending', decode(body, 'base64')
    FROM unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.endpointId)}::uuid[], ${rows.map((r) => r.worldId)}::uuid[],
                ${rows.map((r) => r.eventId)}::uuid[], ${rows.map((r) => r.type)}::text[],
                ${rows.map((r) => r.body.toString("base64"))}::text[])
         AS v(id, endpoint_id, world_id, event_id, type, body)`;
}

/** Redis did not take the jobs in time. Named `TimeoutError`, which service-kit answers with a 503. */
export class EnqueueTimeoutError extends Error {
  constructor(ms: number) {
    super(`Redis did not take the delivery jobs within ${ms} ms`);
    this.name = "TimeoutError";
  }
}
