/**
 * The webhook event types (spec: "Subscriptions and delivered types") and which subscription
 * delivers each one.
 */
import type { WebhookSubscription } from "../endpoints.schema.js";

/** JSON Schema dialect of every webhook schema. */
export const SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

/** Base of the stable `$id`s of the webhook schemas. They name the schemas; nothing is fetched from them. */
export const WEBHOOK_SCHEMA_BASE = "https://schemas.vw.dev/webhooks/";

/** The stable `$id` of a webhook schema: `https://schemas.vw.dev/webhooks/<name>.json`. */
export function webhookSchemaId(name: string): string {
  return `${WEBHOOK_SCHEMA_BASE}${name}.json`;
}

/**
 * Domain event types accepted at intake and delivered asynchronously, one POST per event.
 * `member.connecting` (synchronous, produced during authentication), `analytics.batch` (assembled
 * by the service) and `ping` (Test action) are delivered but never submitted as events.
 */
export const EVENT_TYPES = ["recording.completed", "visitor.registered", "consent.changed"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Every type a receiver can get, in the order of the spec's table. Receivers must ignore others. */
export const DELIVERED_EVENT_TYPES = [
  "recording.completed",
  "visitor.registered",
  "consent.changed",
  "analytics.batch",
  "member.connecting",
  "ping",
] as const;
export type DeliveredEventType = (typeof DELIVERED_EVENT_TYPES)[number];

/** The subscription that brings each delivered type; `ping` has none (the Test action sends it to any endpoint). */
export const SUBSCRIPTION_OF_TYPE: Readonly<Record<DeliveredEventType, WebhookSubscription | null>> = Object.freeze({
  "recording.completed": "recording",
  "visitor.registered": "visitor",
  "consent.changed": "consent",
  "analytics.batch": "analytics",
  "member.connecting": "auth",
  ping: null,
});

/** The delivered types an endpoint subscribed to `subscription` receives (never `ping`). */
export function eventTypesOfSubscription(subscription: WebhookSubscription): DeliveredEventType[] {
  return DELIVERED_EVENT_TYPES.filter((type) => SUBSCRIPTION_OF_TYPE[type] === subscription);
}

/** Whether `value` is a type accepted at intake ({@link EVENT_TYPES}). */
export function isEventType(value: unknown): value is EventType {
  return typeof value === "string" && (EVENT_TYPES as readonly string[]).includes(value);
}

/** Whether `value` is a type the service delivers ({@link DELIVERED_EVENT_TYPES}). */
export function isDeliveredEventType(value: unknown): value is DeliveredEventType {
  return typeof value === "string" && (DELIVERED_EVENT_TYPES as readonly string[]).includes(value);
}

