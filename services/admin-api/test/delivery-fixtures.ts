/**
 * Shared pieces of the Test, delivery-history and Replay integration tests: an endpoint pointed at
 * a loopback receiver (the harness runs with ENDPOINT_URL_POLICY=any), and deliveries written
 * straight into the delivery log's tables in any state the intake and the worker could leave them.
 */
import { expect } from "@jest/globals";
import type { DeliveryStatus } from "@vw/contracts";
import { newDeliveryId, type WebhookEndpoint } from "@vw/db";
import type { AdminApiHarness } from "./harness.js";

/** A world's endpoints path and the id of that world's row. */
export interface TestWorld {
  org: string;
  world: string;
  endpoints: string;
  worldId: string;
}

/** Creates an organization with one world (`main`); `customDomain` optional. */
export async function createWorld(api: AdminApiHarness, customDomain?: string): Promise<TestWorld> {
  const org = api.slug("org");
  expect((await api.request("POST", "/admin/v1/organizations", { body: { slug: org, name: "Org" } })).status).toBe(201);
  const world = "main";
  const created = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, {
    body: { slug: world, name: "W", adminEmails: ["a@example.com"], ...(customDomain ? { customDomain } : {}) },
  });
  expect(created.status).toBe(201);
  return { org, world, endpoints: `/admin/v1/worlds/${org}/${world}/endpoints`, worldId: created.body.id };
}

/** Creates a `current` endpoint for `url`; returns its id and secret. */
export async function createCurrentEndpoint(api: AdminApiHarness, w: TestWorld, url: string, subscriptions: string[] = ["recording"]) {
  const res = await api.request("POST", w.endpoints, { body: { url, subscriptions } });
  expect(res.status).toBe(201);
  return res.body as { id: string; secret: string; apiVersion: string; [k: string]: any };
}

/** Imports a secretless `legacy` endpoint (subscribed to `auth`) for `url`. */
export async function createLegacyEndpoint(api: AdminApiHarness, w: TestWorld, url: string) {
  const res = await api.request("POST", `${w.endpoints}/import-legacy`, { body: { url } });
  expect(res.status).toBe(201);
  return res.body as { id: string; [k: string]: any };
}

/** What a directly inserted delivery may set. */
export interface DeliveryRowInput {
  endpointId: string;
  worldId: string;
  status?: DeliveryStatus;
  type?: string;
  body?: string;
  createdAt?: Date;
  /** When a pending delivery is due (its creation time unless given); ignored for other statuses. */
  nextAttemptAt?: Date | null;
  /** Attempts made (kept on the state row of a delivery that is not delivered; a delivered one counts its attempts rows). */
  attemptCount?: number;
  lastStatus?: number | null;
  /** The run (0 unless given), and its attempts, of a delivery that is not delivered. */
  run?: number;
  runAttempts?: number;
  /** Why a pending delivery waits longer than the schedule (the receiver's Retry-After). */
  waitReason?: string | null;
  /** A UUIDv7 of `createdAt` unless given (the history finds a delivery's partition from its id). */
  id?: string;
}

/**
 * Inserts a delivery as the delivery log would hold it (status `pending` by default): its
 * `webhook_deliveries` row, written once, and, unless it is delivered, its `delivery_states` row
 * (pending ones with a copy of the body to send). Returns its id.
 */
export async function insertDelivery(api: AdminApiHarness, input: DeliveryRowInput): Promise<string> {
  const createdAt = input.createdAt ?? new Date();
  const id = input.id ?? newDeliveryId(createdAt);
  const status = input.status ?? "pending";
  const type = input.type ?? "recording.completed";
  const body = new Uint8Array(Buffer.from(input.body ?? JSON.stringify({ deliveryId: id, type }), "utf8"));
  // A day in the past may have no partition yet in the test database (created from yesterday on).
  await api.prisma.$queryRaw`SELECT vw_create_log_partitions((${createdAt}::timestamptz AT TIME ZONE 'UTC')::date, (${createdAt}::timestamptz AT TIME ZONE 'UTC')::date)`;
  await api.prisma.webhookDelivery.create({ data: { id, endpointId: input.endpointId, worldId: input.worldId, type, body, createdAt } });
  if (status !== "delivered") {
    const pending = status === "pending";
    await api.prisma.deliveryState.create({
      data: {
        deliveryId: id,
        createdAt,
        endpointId: input.endpointId,
        status,
        dueAt: pending ? (input.nextAttemptAt ?? createdAt) : null,
        run: input.run ?? 0,
        runAttempts: input.runAttempts ?? input.attemptCount ?? 0,
        attemptCount: input.attemptCount ?? 0,
        lastStatus: input.lastStatus ?? null,
        body: pending ? body : null,
        waitReason: pending ? (input.waitReason ?? null) : null,
        updatedAt: createdAt,
      },
    });
  }
  return id;
}

/** A delivery as the log holds it: its row, and its state (none: delivered, counted from its attempts). */
export interface StoredDelivery {
  id: string;
  endpointId: string;
  worldId: string;
  /** The `webhook_events` row of the event it carries; null for tests, analytics batches and hook calls. */
  eventId: string | null;
  type: string;
  test: boolean;
  body: Buffer;
  createdAt: Date;
  status: DeliveryStatus;
  attemptCount: number;
  lastStatus: number | null;
  nextAttemptAt: Date | null;
  claimedUntil: Date | null;
  run: number | null;
  runAttempts: number | null;
  waitReason: string | null;
  /** The state row's last change; null for a delivered delivery (it has none). */
  updatedAt: Date | null;
}

/** The stored delivery, read from the log's tables (not through the API under test). */
export async function deliveryRow(api: AdminApiHarness, id: string): Promise<StoredDelivery> {
  const row = await api.prisma.webhookDelivery.findFirstOrThrow({ where: { id } });
  const state = await api.prisma.deliveryState.findUnique({ where: { deliveryId: id } });
  const attempts = await api.prisma.deliveryAttempt.findMany({ where: { deliveryId: id }, orderBy: [{ startedAt: "desc" }, { attemptNumber: "desc" }] });
  return {
    id: row.id,
    endpointId: row.endpointId,
    worldId: row.worldId,
    eventId: row.eventId,
    type: row.type,
    test: row.test,
    body: Buffer.from(row.body),
    createdAt: row.createdAt,
    status: (state?.status ?? "delivered") as DeliveryStatus,
    attemptCount: state?.attemptCount ?? attempts.length,
    lastStatus: state === null ? (attempts[0]?.responseStatus ?? null) : state.lastStatus,
    nextAttemptAt: state?.dueAt ?? null,
    claimedUntil: state?.claimedUntil ?? null,
    run: state?.run ?? null,
    runAttempts: state?.runAttempts ?? null,
    waitReason: state?.waitReason ?? null,
    updatedAt: state?.updatedAt ?? null,
  };
}

/** How many deliveries of the endpoint are in `status` (not delivered: those have a state row). */
export const countInState = (api: AdminApiHarness, endpointId: string, status: Exclude<DeliveryStatus, "delivered">): Promise<number> =>
  api.prisma.deliveryState.count({ where: { endpointId, status } });

/** The stored endpoint row. */
export const endpointRow = (api: AdminApiHarness, id: string): Promise<WebhookEndpoint> => api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } });
