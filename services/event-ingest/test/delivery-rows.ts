/**
 * Deliveries as the tests check them: the written-once `webhook_deliveries` row, its status as the
 * history reads it (delivery-history.ts: no state row means delivered) and its `delivery_states`
 * row (null once delivered), with its attempts. One helper for every test file of the service.
 */
import { DeliveryHistory, prismaRunner, type DeliveryAttempt, type DeliverySummary, type Prisma, type PrismaClient, type WebhookDelivery } from "@vw/db";

/** The `delivery_states` row of a delivery not delivered. */
export type DeliveryStateRow = NonNullable<Awaited<ReturnType<PrismaClient["deliveryState"]["findUnique"]>>>;

/** A delivery row with its status, attempt count and last status (from the history), its state row and its attempts. */
export type DeliveryView = WebhookDelivery &
  Pick<DeliverySummary, "status" | "attemptCount" | "lastStatus" | "nextAttemptAt" | "waitReason"> & {
    state: DeliveryStateRow | null;
    attempts: DeliveryAttempt[];
  };

/** The deliveries matching `where` (ordered by id), each as a {@link DeliveryView}. */
export async function deliveriesWhere(prisma: PrismaClient, where: Prisma.WebhookDeliveryWhereInput): Promise<DeliveryView[]> {
  const rows = await prisma.webhookDelivery.findMany({ where, orderBy: { id: "asc" } });
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const [states, attempts] = await Promise.all([
    prisma.deliveryState.findMany({ where: { deliveryId: { in: ids } } }),
    prisma.deliveryAttempt.findMany({ where: { deliveryId: { in: ids } }, orderBy: [{ startedAt: "asc" }, { attemptNumber: "asc" }] }),
  ]);
  const history = new DeliveryHistory(prismaRunner(prisma));
  const stateOf = new Map(states.map((s) => [s.deliveryId, s]));
  return Promise.all(
    rows.map(async (row): Promise<DeliveryView> => {
      const summary = await history.find(row.endpointId, row.id);
      if (summary === null) throw new Error(`the history does not find delivery ${row.id}`);
      return {
        ...row,
        status: summary.status,
        attemptCount: summary.attemptCount,
        lastStatus: summary.lastStatus,
        nextAttemptAt: summary.nextAttemptAt,
        waitReason: summary.waitReason,
        state: stateOf.get(row.id) ?? null,
        attempts: attempts.filter((a) => a.deliveryId === row.id),
      };
    }),
  );
}

/** The deliveries of the event `producerId` of `worldId` (none when the event is not stored). */
export async function deliveriesOfEvent(prisma: PrismaClient, worldId: string, producerId: string): Promise<DeliveryView[]> {
  const event = await prisma.webhookEvent.findFirst({ where: { worldId, producerId } });
  if (!event) return [];
  return deliveriesWhere(prisma, { eventId: event.id });
}
