/**
 * Delivery history as the admin API shows it (DESIGN: deliveries list, one delivery with every
 * attempt, Test answer). Types only: the history is written by the services, never posted.
 */

/**
 * State of one delivery (the spec names none; these are this project's):
 * `pending` queued or waiting for a retry; `delivered` a 2xx came back; `failed` refused (410,
 * other 4xx, redirect, policy) or retries exhausted; `skipped` its endpoint was disabled before
 * it could be sent (it never will be: no catch-up).
 */
export type DeliveryStatus = "pending" | "delivered" | "failed" | "skipped";

/** Every delivery status, for validation and documentation. */
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ["pending", "delivered", "failed", "skipped"];

/** A delivery in the list (newest first). */
export interface DeliverySummaryResource {
  deliveryId: string;
  endpointId: string;
  type: string;
  test: boolean;
  status: DeliveryStatus;
  attemptCount: number;
  /** HTTP status of the latest attempt, if it got one. */
  lastStatus: number | null;
  /** When the next retry is due, while one is scheduled. */
  nextAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
  /** The producer's `id` of the event it carries; present only for deliveries of an event. */
  eventId?: string;
}

/**
 * Filters of `GET .../endpoints/{id}/deliveries` besides `limit` and `cursor`; all optional and
 * combined with AND. `since` (inclusive) and `until` (exclusive) are RFC 3339 date-times with an
 * offset, on the delivery's creation time.
 */
export interface DeliveryListFilter {
  status?: DeliveryStatus;
  /** An event type, such as `visitor.registered`. */
  type?: string;
  since?: string;
  until?: string;
  /** The producer's event id. */
  eventId?: string;
}

/**
 * `GET .../endpoints/{id}/stats`: the endpoint's figures over the last 24 h, kept up to date as
 * attempts are recorded. `since` is the start of the window (aligned on 5 minutes), `until` now.
 * `deliveries` counts the deliveries created in the window by their current status; `attempts`
 * the attempts started in it. `successRate` is succeeded / total attempts (null without attempts);
 * `latencyMs` the attempt durations' p50 and p99 from a fixed-bucket histogram (interpolated within
 * a bucket; null without attempts); `lastAttempt` the latest attempt in the window.
 */
export interface EndpointStatsResource {
  since: string;
  until: string;
  deliveries: { total: number; delivered: number; failed: number; pending: number; skipped: number };
  attempts: { total: number; succeeded: number; failed: number };
  successRate: number | null;
  latencyMs: { p50: number; p99: number } | null;
  /** `status` is the HTTP status (null when none came back); `outcome` the attempt's verdict (`delivered`, `retry`, `gone`, `rejected`). */
  lastAttempt: { at: string; status: number | null; outcome: string } | null;
}

/** One attempt of a delivery, as sent and answered. */
export interface AttemptResource {
  attemptId: string;
  attemptNumber: number;
  /** `initial`, `retry`, `replay`, `test` or `hook`. */
  trigger: string;
  startedAt: string;
  requestHeaders: Record<string, string>;
  /** The delivery's stored body; the same bytes on every attempt. */
  requestBody: string;
  responseStatus: number | null;
  responseHeaders: Record<string, string> | null;
  /** The first 4 KiB of the answer. */
  responseBody: string | null;
  responseBodyTruncated: boolean;
  durationMs: number;
  /** `timeout`, `connection`, `refused-by-policy` or `redirect`. */
  errorKind: string | null;
  error: string | null;
  /** `delivered`, `retry`, `gone` or `rejected`. */
  verdict: string;
}

/** One delivery with its body and every attempt (oldest first). */
export interface DeliveryResource extends DeliverySummaryResource {
  /** The request body, exactly as sent (UTF-8 JSON text). */
  body: string;
  attempts: AttemptResource[];
}

/** Answer of the Test action. */
export interface TestDeliveryResource {
  deliveryId: string;
  type: string;
  /** HTTP status of the answer, null when there was none (timeout, connection error...). */
  status: number | null;
  durationMs: number;
  responseBody: string | null;
  verdict: string;
  error: string | null;
}
