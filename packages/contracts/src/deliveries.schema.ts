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
