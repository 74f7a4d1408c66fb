/**
 * Delivery history as the admin API shows it (DESIGN: deliveries list, one delivery with every
 * attempt, Test answer): types and the JSON Schemas of the answers (the history is written by the
 * services, never posted), and the Test action's request.
 */
import { WEBHOOK_SUBSCRIPTIONS, type WebhookSubscription } from "./endpoints.schema.js";
import { compileValidator, type ValidationResult } from "./validation.js";

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
  /**
   * Why the next retry is later than the retry schedule, while it is: the receiver answered 429 or
   * 503 with `Retry-After` ("the receiver asked to wait 10 minutes"). Absent otherwise.
   */
  nextAttemptReason?: string;
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
 * `GET .../endpoints/{id}/stats` (one endpoint) and `GET /worlds/{org}/{world}/stats` (every
 * endpoint of the world together): the figures of the last 24 h, kept up to date as attempts are
 * recorded. `since` is the start of the window (aligned on 5 minutes), `until` now.
 * `deliveries` counts the deliveries created in the window by their current status (`pending`:
 * still to be delivered, retries included; `failed`: failed for good); `attempts` the attempts
 * started in it. `successRate` is succeeded / total attempts (null without attempts);
 * `latencyMs` the attempt durations' p50 and p99 from a fixed-bucket histogram (interpolated within
 * a bucket; null without attempts); `lastAttempt` the latest attempt in the window;
 * `attemptsByHour` the attempts per clock hour (UTC), every hour of the window present.
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
  /**
   * Oldest first, the 25 clock hours from the one holding `since` (counted from `since`) to the
   * one holding `until`; they add up to `attempts`. `failed` is every attempt not answered 2xx.
   */
  attemptsByHour: { hour: string; succeeded: number; failed: number }[];
  /**
   * The endpoint's window of attempts in flight as its last drain left it (one endpoint's stats
   * only; absent when it was not sent to lately or Redis does not answer): `size` of at most `max`,
   * and while it is smaller, why and since when.
   */
  sendingWindow?: SendingWindowResource;
}

/** Why an endpoint's window of attempts in flight is below its largest size. */
export type SlowdownReason = "throttled" | "unresponsive";

/** See {@link EndpointStatsResource.sendingWindow}. */
export interface SendingWindowResource {
  size: number;
  max: number;
  slowedDown: boolean;
  /** `throttled`: the receiver answered 429 or 503; `unresponsive`: it timed out or refused connections. Null when not slowed down. */
  reason: SlowdownReason | null;
  /** When it was last made smaller (while slowed down). */
  since: string | null;
}

/** `GET /worlds/{org}/{world}/stats`: the figures of every endpoint the world has, together. */
export type WorldStatsResource = Omit<EndpointStatsResource, "sendingWindow">;

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

// ---- JSON Schemas (answers of the admin API; the OpenAPI document references them) -----------

const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";
const dateTime = { type: "string", format: "date-time" } as const;
const nullableDateTime = { type: ["string", "null"], format: "date-time" } as const;
const httpStatus = { type: ["integer", "null"], minimum: 100, maximum: 599 } as const;

const deliverySummaryProperties = {
  deliveryId: { type: "string", format: "uuid", description: "The `webhook-id` header and the body's `deliveryId`; the same on every retry and replay." },
  endpointId: { type: "string", format: "uuid" },
  type: { type: "string", description: "The delivered type (`recording.completed`, ..., `ping`)." },
  test: { type: "boolean", description: "Sent by the Test action." },
  status: { enum: [...DELIVERY_STATUSES] },
  attemptCount: { type: "integer", minimum: 0 },
  lastStatus: { ...httpStatus, description: "HTTP status of the latest attempt, null when it got none." },
  nextAttemptAt: { ...nullableDateTime, description: "When the next retry is due, while one is scheduled." },
  nextAttemptReason: {
    type: "string",
    description: "Why the next retry is later than the retry schedule, while it is: the receiver answered 429 or 503 with `Retry-After` (\"the receiver asked to wait 10 minutes\"). Absent otherwise.",
  },
  createdAt: dateTime,
  updatedAt: dateTime,
  eventId: { type: "string", description: "The producer's `id` of the event it carries; present only for deliveries of an event." },
} as const;

const deliverySummaryRequired = [
  "deliveryId",
  "endpointId",
  "type",
  "test",
  "status",
  "attemptCount",
  "lastStatus",
  "nextAttemptAt",
  "createdAt",
  "updatedAt",
] as const;

/** Schema of {@link DeliverySummaryResource}. */
export const DELIVERY_SUMMARY_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:delivery-summary",
  title: "Delivery (listed)",
  type: "object",
  additionalProperties: false,
  required: [...deliverySummaryRequired],
  properties: deliverySummaryProperties,
} as const;

const headerMap = { type: "object", additionalProperties: { type: "string" } } as const;

/** Schema of {@link AttemptResource}. */
export const ATTEMPT_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:attempt",
  title: "Delivery attempt",
  type: "object",
  additionalProperties: false,
  required: [
    "attemptId",
    "attemptNumber",
    "trigger",
    "startedAt",
    "requestHeaders",
    "requestBody",
    "responseStatus",
    "responseHeaders",
    "responseBody",
    "responseBodyTruncated",
    "durationMs",
    "errorKind",
    "error",
    "verdict",
  ],
  properties: {
    attemptId: { type: "string" },
    attemptNumber: { type: "integer", minimum: 1 },
    trigger: { type: "string", description: "`initial`, `retry`, `replay`, `test` or `hook`." },
    startedAt: dateTime,
    requestHeaders: {
      ...headerMap,
      description:
        "The headers sent, as sent; the endpoint's custom headers appear with the value `[redacted]` (their values are write-only). " +
        "A delivery proxy's `Proxy-Authorization` is never among them.",
    },
    requestBody: { type: "string", description: "The delivery's body, the same bytes on every attempt." },
    responseStatus: httpStatus,
    responseHeaders: { anyOf: [headerMap, { type: "null" }] },
    responseBody: { type: ["string", "null"], description: "The first 4 KiB of the answer." },
    responseBodyTruncated: { type: "boolean" },
    durationMs: { type: "number", minimum: 0 },
    errorKind: {
      type: ["string", "null"],
      description:
        "`timeout`, `connection` (the delivery proxy's refusal or absence included), `refused-by-policy` or `redirect`; null when an HTTP status came back.",
    },
    error: { type: ["string", "null"] },
    verdict: { type: "string", description: "`delivered`, `retry`, `gone` or `rejected`." },
  },
} as const;

/** Schema of {@link DeliveryResource}: a delivery with its body and every attempt (oldest first). */
export const DELIVERY_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:delivery",
  title: "Delivery with its attempts",
  type: "object",
  additionalProperties: false,
  required: [...deliverySummaryRequired, "body", "attempts"],
  properties: {
    ...deliverySummaryProperties,
    body: { type: "string", description: "The request body exactly as sent (UTF-8 JSON text)." },
    attempts: { type: "array", items: { $ref: ATTEMPT_SCHEMA.$id } },
  },
} as const;

/** Schema of {@link TestDeliveryResource}: what the Test action answers. */
export const TEST_DELIVERY_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:test-delivery",
  title: "Test delivery result",
  type: "object",
  additionalProperties: false,
  required: ["deliveryId", "type", "status", "durationMs", "responseBody", "verdict", "error"],
  properties: {
    deliveryId: { type: "string", format: "uuid" },
    type: { type: "string" },
    status: { ...httpStatus, description: "HTTP status of the answer; null when there was none (timeout, connection error, refused address)." },
    durationMs: { type: "number", minimum: 0 },
    responseBody: { type: ["string", "null"], description: "The first 4 KiB of the answer." },
    verdict: { type: "string" },
    error: { type: ["string", "null"] },
  },
} as const;

const count = { type: "integer", minimum: 0 } as const;

/** Schema of {@link EndpointStatsResource}. */
export const ENDPOINT_STATS_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:endpoint-stats",
  title: "Delivery figures over the last 24 h",
  description: "Of one endpoint, or of every endpoint of a world together.",
  type: "object",
  additionalProperties: false,
  required: ["since", "until", "deliveries", "attempts", "successRate", "latencyMs", "lastAttempt", "attemptsByHour"],
  properties: {
    since: { ...dateTime, description: "Start of the window (aligned on 5 minutes)." },
    until: { ...dateTime, description: "Now." },
    deliveries: {
      type: "object",
      additionalProperties: false,
      required: ["total", "delivered", "failed", "pending", "skipped"],
      properties: {
        total: count,
        delivered: { ...count, description: "Delivered (a 2xx answer)." },
        failed: { ...count, description: "Failed for good: no retry left, a 4xx other than 408 and 429, or a 410." },
        pending: { ...count, description: "Still to be delivered: waiting for their first attempt or a retry." },
        skipped: { ...count, description: "Never sent: the endpoint was disabled or deleted first." },
      },
      description: "Deliveries created in the window, by their current status.",
    },
    attempts: {
      type: "object",
      additionalProperties: false,
      required: ["total", "succeeded", "failed"],
      properties: { total: count, succeeded: count, failed: count },
      description: "Attempts started in the window.",
    },
    successRate: { type: ["number", "null"], minimum: 0, maximum: 1, description: "Succeeded / total attempts; null without attempts." },
    latencyMs: {
      anyOf: [
        { type: "object", additionalProperties: false, required: ["p50", "p99"], properties: { p50: { type: "number" }, p99: { type: "number" } } },
        { type: "null" },
      ],
      description: "Attempt durations' p50 and p99 (fixed-bucket histogram); null without attempts.",
    },
    lastAttempt: {
      anyOf: [
        {
          type: "object",
          additionalProperties: false,
          required: ["at", "status", "outcome"],
          properties: { at: dateTime, status: httpStatus, outcome: { type: "string" } },
        },
        { type: "null" },
      ],
    },
    sendingWindow: {
      type: "object",
      additionalProperties: false,
      required: ["size", "max", "slowedDown", "reason", "since"],
      properties: {
        size: { type: "integer", minimum: 1 },
        max: { type: "integer", minimum: 1 },
        slowedDown: { type: "boolean" },
        reason: { enum: ["throttled", "unresponsive", null], description: "throttled: the receiver answered 429 or 503; unresponsive: it timed out or refused connections." },
        since: nullableDateTime,
      },
      description:
        "The endpoint's window of attempts in flight as its last drain left it (one endpoint's stats only; absent when it was not sent to lately): the platform sends at most `size` at once, halving it on 429 and 503 and growing it back as answers come.",
    },
    attemptsByHour: {
      type: "array",
      minItems: 25,
      maxItems: 25,
      description:
        "Attempts per clock hour (UTC), oldest first, zeros included: the 25 hours from the one holding `since` (counted from `since`) to the one holding `until` (up to now). They add up to `attempts`.",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["hour", "succeeded", "failed"],
        properties: {
          hour: { ...dateTime, description: "Start of the hour." },
          succeeded: { ...count, description: "Attempts answered 2xx." },
          failed: { ...count, description: "Attempts not answered 2xx (to be retried or not)." },
        },
      },
    },
  },
} as const;

/** Body of `POST .../endpoints/{id}/test`; no body at all means `{}`. */
export interface TestDeliveryRequest {
  /** One of the endpoint's subscriptions; absent: a `ping`. */
  subscription?: WebhookSubscription;
}

/** JSON Schema of {@link TestDeliveryRequest}. */
export const TEST_DELIVERY_REQUEST_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: "urn:vw:admin:v1:test-delivery-request",
  title: "Send a test delivery",
  description: "No body, or `{}`, sends a `ping`; a subscription sends a realistic sample of its type.",
  type: "object",
  additionalProperties: false,
  properties: { subscription: { enum: [...WEBHOOK_SUBSCRIPTIONS], description: "One of the endpoint's subscriptions." } },
} as const;

/** Validates a Test request body. */
export const validateTestDeliveryRequest: (data: unknown) => ValidationResult<TestDeliveryRequest> =
  compileValidator<TestDeliveryRequest>(TEST_DELIVERY_REQUEST_SCHEMA);
