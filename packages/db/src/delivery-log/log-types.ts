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

/** A queued delivery and what a worker needs to attempt it. */
export interface DeliveryForAttempt {
  deliveryId: string;
  endpointId: string;
  createdAt: Date;
  body: Buffer;
  status: LogDeliveryStatus;
  attemptCount: number;
  /** When it is due (set while `pending`; null once final). */
  nextAttemptAt: Date | null;
  /** Its current run: 0 for the first, one more per Replay or recover. */
  run: number;
  /** Attempts made in the current run (the retry schedule's position). */
  runAttempts: number;
  test: boolean;
  url: string;
  enabled: boolean;
  secretSealed: string | null;
  /** The endpoint's throttle (deliveries started per second), null for none. */
  rateLimitPerSecond: number | null;
}

/**
 * What the group commit writes for one worker attempt: the attempt as `sendAttempt` of
 * @vw/webhook-core recorded it (the one shape an attempt has from the sender to the log and back
 * out of it), and what it makes of its delivery.
 */
export interface AttemptResult {
  attempt: AttemptRecord;
  endpointId: string;
  /** The delivery's creation time (its partition): {@link DeliveryForAttempt.createdAt}. */
  deliveryCreatedAt: Date;
  status: LogDeliveryStatus;
  nextAttemptAt: Date | null;
  /** Whether the attempt counts towards the endpoint's consecutive failures (ordinary deliveries only). */
  counts: boolean;
  succeeded: boolean;
}

/** A delivery put back to `pending` (Replay, recover) and queued by the caller. */
export interface RequeuedDelivery {
  deliveryId: string;
  endpointId: string;
  /** The run it was put back for (its job's identity). */
  run: number;
  /** Its state before, so a caller that cannot queue it can put it back ({@link DeliveryLog.restore}). */
  previous: { status: LogDeliveryStatus; nextAttemptAt: Date | null; updatedAt: Date; run: number; runAttempts: number };
  requeuedAt: Date;
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

/** A pending delivery as the schedule of record holds it: enough to queue its job again. */
export interface ScheduledDelivery {
  deliveryId: string;
  endpointId: string;
  run: number;
  /** When it is due. */
  nextAttemptAt: Date;
}

/** Keyset position in the schedule (due time, then id). */
export interface ScheduleCursor {
  nextAttemptAt: Date;
  deliveryId: string;
}
