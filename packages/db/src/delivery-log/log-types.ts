/** The plain data the DeliveryLog takes and gives (no database types leak out of it). */
import type { AttemptRecord } from "@vw/webhook-core";

/** `pending` (queued or waiting for a retry), `delivered`, `failed`, `skipped` (endpoint disabled first). */
export type LogDeliveryStatus = "pending" | "delivered" | "failed" | "skipped";

/** A delivery to create, with the exact bytes every attempt will send. */
export interface NewDelivery {
  /** A {@link newDeliveryId} (UUIDv7): its time is the delivery's creation time and partition. */
  id: string;
  endpointId: string;
  worldId: string;
  type: string;
  body: Buffer;
  /** A test delivery (the Test action's kind): never counts towards disabling. */
  test?: boolean;
  /** The event it carries: its `webhook_events` row and the producer's id of it. */
  event?: { rowId: string; producerId: string };
  /** The trace context (W3C traceparent) its attempts continue, with tracing on. */
  trace?: string;
}

/** A delivery written once its only attempt is over (the auth hook, the Test action). */
export interface FinishedDelivery {
  delivery: NewDelivery;
  test: boolean;
  attempt: AttemptRecord;
  finishedAt: Date;
}

/** An event offered to the intake; `rowId` becomes its `webhook_events` id when it is new. */
export interface IntakeEvent {
  rowId: string;
  worldId: string;
  producerId: string;
  type: string;
  /** The producer's timestamp (RFC 3339). */
  occurredAt: string;
}

/** An event offered to the intake as its producer names it: its world by slugs, and its id. */
export interface IntakeEventRef {
  organizationSlug: string;
  worldSlug: string;
  producerId: string;
}

/** A world an intake named, with its enabled endpoints subscribed to any of the intake's subscriptions. */
export interface IntakeWorld {
  id: string;
  organizationSlug: string;
  worldSlug: string;
  customDomain: string | null;
  endpoints: { id: string; apiVersion: string; subscriptions: string[] }[];
}

/**
 * What an intake stores once its worlds are known: its events (the first of each (world, producer
 * id), in lock order) and the deliveries of every one of them; those of events already stored are
 * dropped.
 */
export interface IntakePlan {
  events: IntakeEvent[];
  deliveries: NewDelivery[];
}

/** A pending delivery a drain claimed, with what it needs to attempt it and its endpoint's settings now. */
export interface ClaimedDelivery {
  deliveryId: string;
  endpointId: string;
  /** Its creation time (its partition). */
  createdAt: Date;
  /** When it was due. */
  dueAt: Date;
  /** Its current run: 0 for the first, one more per Replay or recover. */
  run: number;
  /** Attempts made in the current run (the retry schedule's position). */
  runAttempts: number;
  /** Attempts made in all. */
  attemptCount: number;
  body: Buffer;
  test: boolean;
  /** The intake's trace context (W3C traceparent) when tracing was on. */
  trace: string | null;
  /** Until when the claim holds it (no other drain takes it before). */
  claimedUntil: Date;
  /** That time exactly as PostgreSQL holds it: what a release or renewal of this claim names. */
  lease: string;
  endpoint: {
    url: string;
    enabled: boolean;
    secretSealed: string | null;
    rateLimitPerSecond: number | null;
    /** Its custom headers, sealed (`SecretCache.headersOf` opens them); null for none. */
    headersSealed: string | null;
  };
}

/** What a delivery becomes after an attempt, as its fate decided. */
export type DeliveryBecomes = "delivered" | "pending" | "failed";

/** What the consecutive-failure count of the endpoint does after an attempt. */
export type FailureCountChange = "reset" | "increment" | "none";

/**
 * What the group commit writes for one worker attempt: the attempt as `sendAttempt` of
 * @vw/webhook-core recorded it (the one shape an attempt has from the sender to the log and back
 * out of it), and what its fate decided for the delivery and the endpoint.
 */
export interface AttemptApplication {
  attempt: AttemptRecord;
  endpointId: string;
  /** The delivery's creation time (its partition): {@link ClaimedDelivery.createdAt}. */
  deliveryCreatedAt: Date;
  becomes: DeliveryBecomes;
  /** When a delivery that stays pending is due next. */
  dueAt: Date | null;
  /** Why that is later than the retry schedule, for the history (the receiver asked); null otherwise. */
  waitReason: string | null;
  /** The run the attempt belongs to ({@link ClaimedDelivery.run}): one of an earlier run is logged but moves nothing. */
  run: number;
  failures: FailureCountChange;
}

/** An endpoint with pending deliveries, and when the earliest of them is due. */
export interface DueEndpoint {
  endpointId: string;
  dueAt: Date;
}

/** A window on the deliveries' creation time (recover's): `since` inclusive, `until` exclusive. */
export interface CreationWindow {
  since: Date;
  until: Date;
}

/** Keyset position in a window walked oldest first. */
export interface WindowCursor {
  createdAt: Date;
  id: string;
}
