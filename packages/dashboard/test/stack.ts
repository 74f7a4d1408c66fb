/**
 * The real stack the browser tests drive: admin-api (serving the built dashboard), event-ingest
 * and delivery-worker as their own processes on the test run's PostgreSQL and Redis (random
 * REDIS_KEY_PREFIX, random organization slugs), plus a second admin-api under the production
 * default ENDPOINT_URL_POLICY (public-https) for the URL-policy test. Set-up talks to the APIs
 * as the platform would (ADMIN_TOKEN, INGEST_TOKEN); everything the tests assert goes through
 * the browser.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DeliveryLog, createPrismaClient, deliveryCreatedAt, newDeliveryId, prismaRunner, type AttemptApplication, type PrismaClient } from "@vw/db";
import { spawnService, testKeyPrefix, type ServiceProcess } from "@vw/testing";
import { generateSecretBoxKey } from "@vw/webhook-core";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "services");

export interface Stack {
  /** admin-api with ENDPOINT_URL_POLICY=any (loopback receivers work); serves the dashboard. */
  admin: ServiceProcess;
  /** admin-api with the default policy (public-https). */
  strictAdmin: ServiceProcess;
  ingest: ServiceProcess;
  worker: ServiceProcess;
  /** map-storage, which admin-api asks for the overview's room list (same ADMIN_TOKEN). */
  mapStorage: ServiceProcess;
  adminToken: string;
  ingestToken: string;
  slugPrefix: string;
  /** Calls an admin-api as the platform (ADMIN_TOKEN); JSON in and out, throws on non-2xx. */
  adminCall<T = any>(method: string, path: string, body?: unknown, base?: string): Promise<T>;
  /** Creates an organization and a world; returns their slugs. */
  createWorld(label: string): Promise<{ org: string; world: string; name: string }>;
  /** Mints a one-time dashboard link for a world. */
  mintLink(org: string, world: string, body?: { capabilities?: string[]; ttlSeconds?: number }, base?: string): Promise<string>;
  /**
   * Moves the opening deadline of every unopened link of a world into the past: what 10 minutes
   * of waiting would do, without waiting (the processes run on the real clock).
   */
  expireUnopenedLinks(org: string, world: string): Promise<void>;
  /** Posts one event to event-ingest as the platform; returns its id. */
  postEvent(org: string, world: string, type: string, data: unknown): Promise<string>;
  /**
   * Writes a day of an endpoint's history through the delivery log (its one writer), as the worker
   * would have: per entry, `delivered` deliveries delivered at their first attempt and `failed`
   * ones failed for good (a 400), each attempt started `hoursAgo` hours ago; then `retrying`
   * deliveries whose first attempt got a 503 just now, due again at `nextAttemptAt`.
   */
  seedHistory(endpointId: string, hours: { hoursAgo: number; delivered: number; failed: number }[], retrying: { count: number; nextAttemptAt: Date }): Promise<void>;
  close(): Promise<void>;
}

async function call<T>(base: string, token: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return (text === "" ? undefined : JSON.parse(text)) as T;
}

/** Starts the stack; call `close` in afterAll. */
export async function startStack(): Promise<Stack> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error("DATABASE_URL is not set: run the tests through jest (test/global-setup.js)");
  const common = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    // Under the run's prefix: the global teardown deletes the queues the processes leave.
    REDIS_KEY_PREFIX: testKeyPrefix("dash-"),
    SECRETS_ENCRYPTION_KEY: generateSecretBoxKey(),
    PUBLIC_MAP_STORAGE_URL: "https://maps.example.test",
    PLAY_URL: "https://play.example.test",
    LOG_LEVEL: "error",
  };
  const adminToken = `dash-admin-${randomBytes(12).toString("hex")}`;
  const ingestToken = `dash-ingest-${randomBytes(12).toString("hex")}`;
  // Started first: admin-api is told where it is. S3_* come from the test run's environment (its s3rver).
  const mapStorage = await spawnService(join(servicesDir, "map-storage"), { ...common, ADMIN_TOKEN: adminToken }, { readyTimeoutMs: 90_000 });
  const adminEnv = (port: number) => ({ ...common, ADMIN_TOKEN: adminToken, PUBLIC_ADMIN_URL: `http://127.0.0.1:${port}`, MAP_STORAGE_INTERNAL_URL: mapStorage.url });
  const [admin, strictAdmin, ingest, worker] = await Promise.all([
    spawnService(join(servicesDir, "admin-api"), (port) => ({ ...adminEnv(port), ENDPOINT_URL_POLICY: "any" }), { readyTimeoutMs: 90_000 }),
    spawnService(join(servicesDir, "admin-api"), adminEnv, { readyTimeoutMs: 90_000 }),
    spawnService(join(servicesDir, "event-ingest"), { ...common, INGEST_TOKEN: ingestToken, ENDPOINT_URL_POLICY: "any" }, { readyTimeoutMs: 90_000 }),
    // One quick retry, so a receiver outage turns deliveries into `failed` within a second.
    spawnService(join(servicesDir, "delivery-worker"), { ...common, ENDPOINT_URL_POLICY: "any", RETRY_DELAYS: "100ms", DELIVERY_RETENTION_DAYS: "36500" }, { readyTimeoutMs: 90_000 }),
  ]);
  const prisma: PrismaClient = createPrismaClient(databaseUrl, { max: 2 });
  const slugPrefix = `d${randomBytes(3).toString("hex")}-`;

  const adminCall = <T>(method: string, path: string, body?: unknown, base = admin.url) => call<T>(base, adminToken, method, path, body);
  return {
    admin,
    strictAdmin,
    ingest,
    worker,
    mapStorage,
    adminToken,
    ingestToken,
    slugPrefix,
    adminCall,
    async createWorld(label) {
      const org = `${slugPrefix}${label}`;
      await adminCall("POST", "/admin/v1/organizations", { slug: org, name: `${label} Inc.` });
      const name = `${label[0]!.toUpperCase()}${label.slice(1)} HQ`;
      await adminCall("POST", `/admin/v1/organizations/${org}/worlds`, {
        slug: "hq",
        name,
        adminEmails: ["ops@example.test"],
        identityProviders: [
          { id: "corp-sso", kind: "openid-connect", exposeAccessToken: false },
          { id: "google", kind: "google" },
        ],
      });
      return { org, world: "hq", name };
    },
    async mintLink(org, world, body = {}, base = admin.url) {
      const minted = await call<{ url: string }>(base, adminToken, "POST", `/admin/v1/worlds/${org}/${world}/dashboard-sessions`, body);
      return minted.url;
    },
    async expireUnopenedLinks(org, world) {
      await prisma.$executeRaw`
        UPDATE dashboard_sessions SET code_expires_at = now() - interval '1 second'
        WHERE exchanged_at IS NULL AND world_id = (
          SELECT w.id FROM worlds w JOIN organizations o ON o.id = w.organization_id WHERE o.slug = ${org} AND w.slug = ${world})`;
    },
    async postEvent(org, world, type, data) {
      const id = `evt-${randomUUID()}`;
      await call(ingest.url, ingestToken, "POST", "/v1/events", { id, world: `${org}/${world}`, type, timestamp: new Date().toISOString(), data });
      return id;
    },
    async seedHistory(endpointId, hours, retrying) {
      const { worldId } = await prisma.webhookEndpoint.findUniqueOrThrow({ where: { id: endpointId }, select: { worldId: true } });
      const log = new DeliveryLog(prismaRunner(prisma));
      const plan = [
        ...hours.flatMap((h) => [
          ...Array.from({ length: h.delivered }, () => ({ startedAt: new Date(Date.now() - h.hoursAgo * 3600_000), answer: 200, status: "delivered" as const, next: null })),
          ...Array.from({ length: h.failed }, () => ({ startedAt: new Date(Date.now() - h.hoursAgo * 3600_000), answer: 400, status: "failed" as const, next: null })),
        ]),
        ...Array.from({ length: retrying.count }, () => ({ startedAt: new Date(), answer: 503, status: "pending" as const, next: retrying.nextAttemptAt })),
      ];
      const deliveries = plan.map(() => ({ id: newDeliveryId(), endpointId, worldId, type: "visitor.registered", body: Buffer.from('{"seeded":true}') }));
      await log.create(deliveries);
      // What the worker's fate decided for each: delivered (the failure count reset), failed for
      // good or pending again (one more consecutive failure).
      const applications: AttemptApplication[] = plan.map((p, i) => ({
        attempt: {
          id: randomUUID(),
          deliveryId: deliveries[i]!.id,
          attemptNumber: 1,
          trigger: "initial",
          startedAt: p.startedAt,
          requestHeaders: { "webhook-id": deliveries[i]!.id },
          responseStatus: p.answer,
          responseHeaders: { "content-type": "text/plain" },
          responseBody: p.answer === 200 ? "ok" : "no",
          responseBodyTruncated: false,
          durationMs: 40 + (i % 7) * 30,
          errorKind: null,
          error: null,
          verdict: p.answer === 200 ? "delivered" : p.answer === 400 ? "rejected" : "retry",
        },
        endpointId,
        deliveryCreatedAt: deliveryCreatedAt(deliveries[i]!.id),
        becomes: p.status,
        dueAt: p.next,
        waitReason: null,
        run: 0,
        failures: p.answer === 200 ? "reset" : "increment",
      }));
      await log.record(applications);
    },
    async close() {
      await Promise.all([admin.stop(), strictAdmin.stop(), ingest.stop(), worker.stop(), mapStorage.stop()]);
      await prisma.organization.deleteMany({ where: { slug: { startsWith: slugPrefix } } });
      await prisma.$disconnect();
    },
  };
}
