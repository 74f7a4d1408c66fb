/**
 * Shared pieces of the Test, delivery-history and Replay integration tests: an endpoint pointed at
 * a loopback receiver (the harness runs with ENDPOINT_URL_POLICY=any), and delivery rows written
 * straight into the database the way event-ingest and the worker would.
 */
import { randomUUID } from "node:crypto";
import { expect } from "@jest/globals";
import type { DeliveryStatus } from "@vw/contracts";
import type { WebhookDelivery, WebhookEndpoint } from "@vw/db";
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

/** What a directly inserted delivery row may set. */
export interface DeliveryRowInput {
  endpointId: string;
  worldId: string;
  status?: DeliveryStatus;
  type?: string;
  body?: string;
  createdAt?: Date;
  nextAttemptAt?: Date | null;
  attemptCount?: number;
  lastStatus?: number | null;
  id?: string;
}

/** Inserts a delivery as event-ingest would (status `pending` by default); returns its id. */
export async function insertDelivery(api: AdminApiHarness, input: DeliveryRowInput): Promise<string> {
  const id = input.id ?? randomUUID();
  const createdAt = input.createdAt ?? new Date();
  // A day in the past may have no partition yet in the test database (created from yesterday on).
  await api.prisma.$queryRaw`SELECT vw_create_log_partitions((${createdAt}::timestamptz AT TIME ZONE 'UTC')::date, (${createdAt}::timestamptz AT TIME ZONE 'UTC')::date)`;
  await api.prisma.webhookDelivery.create({
    data: {
      id,
      endpointId: input.endpointId,
      worldId: input.worldId,
      type: input.type ?? "recording.completed",
      body: new Uint8Array(Buffer.from(input.body ?? JSON.stringify({ deliveryId: id, type: input.type ?? "recording.completed" }), "utf8")),
      status: input.status ?? "pending",
      attemptCount: input.attemptCount ?? 0,
      lastStatus: input.lastStatus ?? null,
      nextAttemptAt: input.nextAttemptAt ?? null,
      createdAt,
      updatedAt: createdAt,
    },
  });
  return id;
}

/** The stored delivery row. */
export const deliveryRow = (api: AdminApiHarness, id: string): Promise<WebhookDelivery> => api.prisma.webhookDelivery.findFirstOrThrow({ where: { id } });

/** The stored endpoint row. */
export const endpointRow = (api: AdminApiHarness, id: string): Promise<WebhookEndpoint> => api.prisma.webhookEndpoint.findUniqueOrThrow({ where: { id } });
