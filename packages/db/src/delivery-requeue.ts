/**
 * Sending stored deliveries again (Replay of one, recover of many), as functions over a Prisma
 * client: thin delegates to the DeliveryLog (`requeue`, `restore`) and DeliveryHistory
 * (`countInWindow`, `pageInWindow`), the one owner of the delivery log, kept so Replay and the
 * recover job read as before. See DeliveryLog for the statements and their guarantees.
 */
import type { PrismaClient } from "./generated/prisma/client.js";
import { DeliveryHistory } from "./delivery-log/delivery-history.js";
import { DeliveryLog } from "./delivery-log/delivery-log.js";
import type { LogDeliveryStatus, RequeuedDelivery } from "./delivery-log/log-types.js";
import { prismaRunner } from "./delivery-log/sql-runner.js";

export type { RequeuedDelivery } from "./delivery-log/log-types.js";

/** A window on the deliveries' creation time: `since` inclusive, `until` exclusive. */
export interface CreationWindow {
  since: Date;
  until: Date;
}

/** Keyset position in a window walked oldest first. */
export interface WindowCursor {
  createdAt: Date;
  id: string;
}

/**
 * Puts the given deliveries of an ENABLED endpoint back to `pending` (no next attempt), in one
 * statement that locks them and checks the endpoint, so a disable landing at the same moment is
 * never overtaken; with `onlyStatus`, only deliveries still in that status. Returns those it changed.
 */
export function requeueDeliveries(prisma: PrismaClient, endpointId: string, deliveryIds: readonly string[], options: { onlyStatus?: string } = {}): Promise<RequeuedDelivery[]> {
  const onlyStatus = options.onlyStatus as LogDeliveryStatus | undefined;
  return new DeliveryLog(prismaRunner(prisma)).requeue(endpointId, deliveryIds, onlyStatus === undefined ? {} : { onlyStatus });
}

/** Undoes {@link requeueDeliveries} whose jobs could not be queued, for each delivery nothing touched since. */
export function restoreDeliveries(prisma: PrismaClient, requeued: readonly RequeuedDelivery[]): Promise<void> {
  return new DeliveryLog(prismaRunner(prisma)).restore(requeued);
}

/** How many deliveries of the endpoint in `status` were created in the window. */
export function countDeliveriesInWindow(prisma: PrismaClient, endpointId: string, status: string, window: CreationWindow): Promise<number> {
  return new DeliveryHistory(prismaRunner(prisma)).countInWindow(endpointId, status as LogDeliveryStatus, window);
}

/** The next `limit` deliveries of the endpoint in `status` created in the window, oldest first, after `cursor`. */
export function deliveriesInWindowPage(
  prisma: PrismaClient,
  endpointId: string,
  status: string,
  window: CreationWindow,
  cursor: WindowCursor | null,
  limit: number,
): Promise<WindowCursor[]> {
  return new DeliveryHistory(prismaRunner(prisma)).pageInWindow(endpointId, status as LogDeliveryStatus, window, cursor, limit);
}
