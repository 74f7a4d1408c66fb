/**
 * The one writer of `delivery_recoveries`: recover jobs as admin-api creates them and the delivery
 * worker runs them (status, progress, the cursor a retried job resumes from).
 */
import { randomUUID } from "node:crypto";
import type { DeliveryRecovery, PrismaClient } from "./generated/prisma/client.js";
import type { WindowCursor } from "./delivery-log/log-types.js";

/** States of a recovery, in the order it goes through them (`failed` ends it early). */
export type RecoveryState = "queued" | "running" | "done" | "failed";

/** Recover jobs of endpoints. */
export class DeliveryRecoveries {
  constructor(private readonly prisma: PrismaClient) {}

  /** Records a queued recovery of the endpoint's failed deliveries created in [since, until). */
  create(input: { endpointId: string; since: Date; until: Date; total: number }): Promise<DeliveryRecovery> {
    const now = new Date();
    return this.prisma.deliveryRecovery.create({
      data: { id: randomUUID(), endpointId: input.endpointId, since: input.since, until: input.until, status: "queued", total: input.total, createdAt: now, updatedAt: now },
    });
  }

  /** One recovery of the endpoint, or null. */
  find(endpointId: string, id: string): Promise<DeliveryRecovery | null> {
    return this.prisma.deliveryRecovery.findFirst({ where: { id, endpointId } });
  }

  /** The recovery, or null when it is gone (its endpoint was deleted). */
  get(id: string): Promise<DeliveryRecovery | null> {
    return this.prisma.deliveryRecovery.findUnique({ where: { id } });
  }

  /** Marks a queued (or interrupted running) recovery as running; false when it has already ended or is gone. */
  async start(id: string): Promise<boolean> {
    const { count } = await this.prisma.deliveryRecovery.updateMany({
      where: { id, status: { in: ["queued", "running"] } },
      data: { status: "running", updatedAt: new Date() },
    });
    return count === 1;
  }

  /** Records one batch handed to the queue: `requeued` more, and the cursor after it. */
  async advance(id: string, cursor: WindowCursor, requeued: number): Promise<void> {
    await this.prisma.deliveryRecovery.updateMany({
      where: { id },
      data: { cursorCreatedAt: cursor.createdAt, cursorId: cursor.id, requeued: { increment: requeued }, updatedAt: new Date() },
    });
  }

  /** Ends the recovery: `done`, or `failed` with the reason shown to the user. */
  async finish(id: string, status: "done" | "failed", error: string | null = null): Promise<void> {
    await this.prisma.deliveryRecovery.updateMany({
      where: { id, status: { in: ["queued", "running"] } },
      data: { status, error, updatedAt: new Date() },
    });
  }
}

/** The resume position stored on a recovery, or null before its first batch. */
export function recoveryCursor(row: DeliveryRecovery): WindowCursor | null {
  return row.cursorCreatedAt !== null && row.cursorId !== null ? { createdAt: row.cursorCreatedAt, id: row.cursorId } : null;
}
