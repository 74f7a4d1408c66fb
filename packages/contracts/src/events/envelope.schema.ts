/**
 * The delivery envelope (spec: "Delivery envelope"): the body of every current-format delivery,
 * whatever its type, and the per-type delivery schemas (envelope + that type's `data`).
 */
import { SLUG_PATTERN } from "../admin.schema.js";
import { DELIVERED_EVENT_TYPES, SCHEMA_DIALECT, webhookSchemaId, type DeliveredEventType } from "./event-types.js";
import { EVENT_DATA_SCHEMAS, type EventDataByType } from "./payloads.schema.js";

/** The world an event belongs to. */
export interface WebhookWorld {
  slug: string;
  /** URL of the world. */
  url: string;
}

/**
 * A current-format delivery body. `T` and `D` narrow the type and payload; the defaults describe
 * any envelope, including one of a type this build does not know.
 */
export interface WebhookEnvelope<T extends string = string, D extends object = Record<string, unknown>> {
  /** Same on every retry and replay of one delivery (with a byte-identical body): deduplicate on it. */
  deliveryId: string;
  /** `YYYY-MM-DD`, frozen for the endpoint when it was created. */
  apiVersion: string;
  type: T;
  /** When the event happened (for `analytics.batch`, when the batch was assembled); kept by retries. */
  timestamp: string;
  world: WebhookWorld;
  /** `{}` when the event has no payload. */
  data: D;
  /** Present, and true, only on deliveries sent by the dashboard Test action. */
  test?: true;
}

/** A delivery of one known type. */
export type WebhookDelivery<T extends DeliveredEventType = DeliveredEventType> = T extends DeliveredEventType
  ? WebhookEnvelope<T, EventDataByType[T]>
  : never;

export const ENVELOPE_SCHEMA_ID = webhookSchemaId("envelope");

/** `apiVersion` shape: a date, `YYYY-MM-DD`. */
export const API_VERSION_PATTERN = "^\\d{4}-\\d{2}-\\d{2}$";

/**
 * The envelope of any delivery (draft 2020-12). Closed: a new envelope member comes with a new
 * `apiVersion`. `type` is any non-empty string, because receivers must accept types they do not know.
 */
export const ENVELOPE_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: ENVELOPE_SCHEMA_ID,
  title: "Webhook delivery envelope",
  description: "Body of every delivery to a current-format endpoint: one event.",
  type: "object",
  additionalProperties: false,
  required: ["deliveryId", "apiVersion", "type", "timestamp", "world", "data"],
  properties: {
    deliveryId: {
      type: "string",
      format: "uuid",
      description: "Identifies the POST; reused, with a byte-identical body, by every retry and replay. Equals the webhook-id header.",
    },
    apiVersion: { type: "string", pattern: API_VERSION_PATTERN, description: "Frozen for the endpoint when it was created." },
    type: { type: "string", minLength: 1, description: "Event type; ignore types you do not know." },
    timestamp: { type: "string", format: "date-time", description: "When the event happened (UTC); a retry keeps it." },
    world: {
      type: "object",
      additionalProperties: false,
      required: ["slug", "url"],
      properties: {
        slug: { type: "string", pattern: SLUG_PATTERN },
        url: { type: "string", format: "uri", description: "URL of the world." },
      },
    },
    data: { type: "object", description: "Event payload; `{}` when the event has none." },
    test: { const: true, description: "Present, and true, only on deliveries sent by the dashboard Test action." },
  },
} as const;

/** The `$id` of the delivery schema of a type: `https://schemas.vw.dev/webhooks/delivery/<type>.json`. */
export function deliverySchemaId(type: DeliveredEventType): string {
  return webhookSchemaId(`delivery/${type}`);
}

/** Delivery schema of one type: the envelope, with `type` fixed and `data` checked by the type's payload schema. */
export interface DeliverySchema {
  $schema: typeof SCHEMA_DIALECT;
  $id: string;
  title: string;
  type: "object";
  allOf: [{ $ref: typeof ENVELOPE_SCHEMA_ID }];
  properties: { type: { const: DeliveredEventType }; data: { $ref: string } };
}

function deliverySchemaOf(type: DeliveredEventType): DeliverySchema {
  return {
    $schema: SCHEMA_DIALECT,
    $id: deliverySchemaId(type),
    title: `${type} delivery`,
    type: "object",
    // The envelope's additionalProperties sees `type` and `data` as its own members, so
    // narrowing them here does not make them "additional".
    allOf: [{ $ref: ENVELOPE_SCHEMA_ID }],
    properties: { type: { const: type }, data: { $ref: EVENT_DATA_SCHEMAS[type].$id } },
  };
}

/** The delivery schema of each delivered type, referring to {@link ENVELOPE_SCHEMA} and the payload schemas by `$id`. */
export const DELIVERY_SCHEMAS: Readonly<Record<DeliveredEventType, DeliverySchema>> = Object.freeze(
  Object.fromEntries(DELIVERED_EVENT_TYPES.map((type) => [type, deliverySchemaOf(type)])) as Record<
    DeliveredEventType,
    DeliverySchema
  >,
);
