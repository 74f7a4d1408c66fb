/**
 * Validators of the webhook schemas. Every schema goes on one private ajv instance (so their `$ref`s
 * by `$id` resolve, and so they cannot clash with schemas of other modules on the shared instance);
 * each is compiled on first use and kept.
 */
import { compileValidator, createAjv, type Ajv2020, type ValidationResult } from "../validation.js";
import { ANALYTICS_EVENT_SCHEMA, type AnalyticsEvent } from "./analytics.schema.js";
import { DELIVERY_SCHEMAS, ENVELOPE_SCHEMA, type WebhookDelivery, type WebhookEnvelope } from "./envelope.schema.js";
import { isDeliveredEventType, type DeliveredEventType } from "./event-types.js";
import { EVENT_DATA_SCHEMAS, LEGACY_AUTH_BODY_SCHEMA, type EventDataByType, type LegacyAuthBody } from "./payloads.schema.js";

/** Every webhook schema, each a separate resource with its own `$id`. */
export const WEBHOOK_SCHEMAS: readonly { $id: string }[] = Object.freeze([
  ENVELOPE_SCHEMA,
  ANALYTICS_EVENT_SCHEMA,
  LEGACY_AUTH_BODY_SCHEMA,
  ...Object.values(EVENT_DATA_SCHEMAS),
  ...Object.values(DELIVERY_SCHEMAS),
]);

type Validate<T> = (data: unknown) => ValidationResult<T>;

let ajv: Ajv2020 | undefined;
const compiled = new Map<object, Validate<unknown>>();

function validatorOf<T>(schema: object): Validate<T> {
  let validate = compiled.get(schema);
  if (!validate) {
    if (!ajv) {
      ajv = createAjv();
      ajv.addSchema(WEBHOOK_SCHEMAS as object[]);
    }
    validate = compileValidator<unknown>(schema, ajv);
    compiled.set(schema, validate);
  }
  return validate as Validate<T>;
}

/**
 * Validates the `data` of an event of `type` (pointers are rooted at `data`, every bad member is
 * listed). Intake uses it for {@link EVENT_TYPES}; it accepts every delivered type.
 * @throws RangeError when `type` is not a delivered type: check it first with `isEventType`.
 */
export function validateEventData<T extends DeliveredEventType>(type: T, data: unknown): ValidationResult<EventDataByType[T]> {
  if (!isDeliveredEventType(type)) throw new RangeError(`no schema for the event type ${JSON.stringify(type)}`);
  return validatorOf<EventDataByType[T]>(EVENT_DATA_SCHEMAS[type])(data);
}

/** Validates an envelope of any type, `data` being any object (what a tolerant receiver checks). */
export function validateEnvelope(body: unknown): ValidationResult<WebhookEnvelope> {
  return validatorOf<WebhookEnvelope>(ENVELOPE_SCHEMA)(body);
}

/** Validates a whole delivery of `type`: the envelope, `type` equal to it, and `data` against its schema. */
export function validateDelivered<T extends DeliveredEventType>(type: T, body: unknown): ValidationResult<WebhookDelivery<T>> {
  if (!isDeliveredEventType(type)) throw new RangeError(`no schema for the event type ${JSON.stringify(type)}`);
  return validatorOf<WebhookDelivery<T>>(DELIVERY_SCHEMAS[type])(body);
}

/** Validates the flat `member.connecting` body of legacy-format endpoints. */
export function validateLegacyAuthBody(body: unknown): ValidationResult<LegacyAuthBody> {
  return validatorOf<LegacyAuthBody>(LEGACY_AUTH_BODY_SCHEMA)(body);
}

/** Validates one inner analytics event (unknown names are accepted with any properties). */
export function validateAnalyticsEvent(event: unknown): ValidationResult<AnalyticsEvent> {
  return validatorOf<AnalyticsEvent>(ANALYTICS_EVENT_SCHEMA)(event);
}
