/**
 * The fan-out, as a pure function of what the intake read: one delivery per (new event, enabled
 * endpoint of its world subscribed to the event type's subscription), each carrying the exact
 * bytes every attempt will send. The subscriptions are matched here, once; each event's envelope is
 * serialised once and every delivery of it only adds its own deliveryId and its endpoint's
 * apiVersion in front (`envelopeTemplate`).
 */
import { newDeliveryId, type IntakeWorld, type NewDelivery } from "@vw/db";
import { SUBSCRIPTION_OF_TYPE } from "@vw/contracts";
import { envelopeTemplate, worldReference } from "@vw/webhook-core";

/** An event of the intake, with the row id it gets and its world. */
export interface FanOutEvent {
  rowId: string;
  producerId: string;
  type: string;
  timestamp: string;
  data: unknown;
  world: IntakeWorld;
  /** The trace context its deliveries' attempts continue (tracing on). */
  trace?: string;
}

/** The endpoints of `world` that get events of `type`: enabled ones subscribed to its subscription. */
export function endpointsFor(world: IntakeWorld, type: string): IntakeWorld["endpoints"] {
  const subscription = (SUBSCRIPTION_OF_TYPE as Readonly<Record<string, string | null>>)[type];
  if (subscription === null || subscription === undefined) return [];
  return world.endpoints.filter((e) => e.subscriptions.includes(subscription));
}

/**
 * The deliveries of `events` (see the file comment). Their ids are UUIDv7s of `createdAt`, the
 * intake's time, so they share their event's daily partition. Legacy-format endpoints get the
 * envelope too: the spec defines a legacy body only for `member.connecting`.
 */
export function fanOut(events: readonly FanOutEvent[], createdAt: Date, playUrl: string): NewDelivery[] {
  const rows: NewDelivery[] = [];
  for (const event of events) {
    const endpoints = endpointsFor(event.world, event.type);
    if (endpoints.length === 0) continue;
    const { world } = event;
    const envelope = envelopeTemplate({
      type: event.type,
      timestamp: event.timestamp,
      world: worldReference(playUrl, world.organizationSlug, world.worldSlug, world.customDomain),
      data: event.data,
    });
    for (const endpoint of endpoints) {
      const id = newDeliveryId(createdAt);
      rows.push({
        id,
        endpointId: endpoint.id,
        worldId: world.id,
        type: event.type,
        body: envelope(id, endpoint.apiVersion),
        event: { rowId: event.rowId, producerId: event.producerId },
        ...(event.trace === undefined ? {} : { trace: event.trace }),
      });
    }
  }
  return rows;
}
