/**
 * The platform as deployed behind a transaction-pooling PgBouncer: admin-api, event-ingest,
 * delivery-worker and map-storage as their own processes, DATABASE_URL pointing at a real
 * PgBouncer (Debian's, `pool_mode = transaction`, `?pgbouncer=true`) and DIRECT_URL at PostgreSQL,
 * on a database of the file's own (the worker's reconciler reads every pending delivery) and a
 * random Redis key prefix. Set-up and checks go through the services' HTTP APIs, as the platform
 * and customers would; `prisma` (on PostgreSQL directly) is for reading the outcome only.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "@jest/globals";
import { EVENT_SAMPLES } from "@vw/contracts";
import { createPrismaClient, type PrismaClient } from "@vw/db";
import { createTestDatabase, spawnService, startPgBouncer, testKeyPrefix, type PgBouncer, type ServiceProcess, type TestDatabase } from "@vw/testing";
import { generateSecretBoxKey } from "@vw/webhook-core";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

/** The four services by name (their `application_name`). */
export const SERVICE_NAMES = ["admin-api", "event-ingest", "delivery-worker", "map-storage"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export interface PgBouncerStack {
  bouncer: PgBouncer;
  database: TestDatabase;
  services: Record<ServiceName, ServiceProcess>;
  adminToken: string;
  ingestToken: string;
  /** On PostgreSQL directly: for reading outcomes, never for set-up the APIs can do. */
  prisma: PrismaClient;
  /** A JSON call; resolves with status and parsed body (no throw on non-2xx). */
  call(base: string, method: string, path: string, options?: { token?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: any; headers: Headers }>;
  /** Creates an organization and a world through admin-api; returns their slugs. */
  createWorld(): Promise<{ org: string; world: string }>;
  /** A `visitor.registered` event of the world, carrying `uuid` (unique per event in these tests). */
  visitorEvent(org: string, world: string, uuid?: string): { id: string; world: string; type: string; timestamp: string; data: Record<string, unknown> };
  /** POST /v1/events on event-ingest as the platform. */
  postEvents(events: unknown[]): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

/** Starts PgBouncer in front of a fresh database, then the four services behind it. */
export async function startPgBouncerStack(extraEnv: Partial<Record<ServiceName, Record<string, string>>> = {}): Promise<PgBouncerStack> {
  const database = await createTestDatabase();
  const bouncer = await startPgBouncer({ targetUrl: database.url });
  const adminToken = `pgb-admin-${randomBytes(12).toString("hex")}`;
  const ingestToken = `pgb-ingest-${randomBytes(12).toString("hex")}`;
  const common = {
    DATABASE_URL: bouncer.urlFor(database.url),
    DIRECT_URL: database.url,
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    REDIS_KEY_PREFIX: testKeyPrefix("pgb-"),
    SECRETS_ENCRYPTION_KEY: generateSecretBoxKey(),
    PUBLIC_MAP_STORAGE_URL: "https://maps.example.test",
    PLAY_URL: "https://play.example.test",
    ENDPOINT_URL_POLICY: "any",
    LOG_LEVEL: "warn",
  };
  const started: ServiceProcess[] = [];
  const spawn = async (name: ServiceName, env: Record<string, string> | ((port: number) => Record<string, string>)) => {
    const service = await spawnService(
      join(servicesDir, name),
      (port) => ({ ...common, ...(typeof env === "function" ? env(port) : env), ...extraEnv[name] }),
      { readyTimeoutMs: 120_000 },
    );
    started.push(service);
    return service;
  };
  try {
    // S3_* come from the test run's environment (its S3 server).
    const mapStorage = await spawn("map-storage", { ADMIN_TOKEN: adminToken });
    const [admin, ingest, worker] = await Promise.all([
      spawn("admin-api", (port) => ({ ADMIN_TOKEN: adminToken, PUBLIC_ADMIN_URL: `http://127.0.0.1:${port}`, MAP_STORAGE_INTERNAL_URL: mapStorage.url })),
      spawn("event-ingest", { INGEST_TOKEN: ingestToken }),
      // Quick retries: deliveries interrupted by a PgBouncer restart come back within seconds.
      spawn("delivery-worker", { RETRY_DELAYS: "200ms,500ms,1s,2s,3s,5s,5s,5s,5s", DELIVERY_RETENTION_DAYS: "36500", RECONCILE_INTERVAL_MS: "2000" }),
    ]);
    const prisma = createPrismaClient(database.url, { max: 2 });
    const call: PgBouncerStack["call"] = async (base, method, path, options = {}) => {
      const token = options.token === undefined ? adminToken : options.token;
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(token === null ? {} : { authorization: `Bearer ${token}` }),
          ...(options.body === undefined ? {} : { "content-type": "application/json" }),
          ...options.headers,
        },
        ...(options.body === undefined ? {} : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) }),
      });
      const text = await res.text();
      let body: unknown = text;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        // not JSON: kept as text
      }
      return { status: res.status, body, headers: res.headers };
    };
    const slugPrefix = `pgb${randomBytes(3).toString("hex")}-`;
    let worlds = 0;
    return {
      bouncer,
      database,
      services: { "admin-api": admin, "event-ingest": ingest, "delivery-worker": worker, "map-storage": mapStorage },
      adminToken,
      ingestToken,
      prisma,
      call,
      async createWorld() {
        worlds += 1;
        const org = `${slugPrefix}${worlds}`;
        const world = "hq";
        expect((await call(admin.url, "POST", "/admin/v1/organizations", { body: { slug: org, name: "PgBouncer Inc." } })).status).toBe(201);
        const created = await call(admin.url, "POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug: world, name: "HQ", adminEmails: ["ops@example.test"] } });
        expect(created.status).toBe(201);
        return { org, world };
      },
      visitorEvent(org, world, uuid = randomUUID()) {
        return {
          id: randomUUID(),
          world: `${org}/${world}`,
          type: "visitor.registered",
          timestamp: new Date().toISOString(),
          data: { ...EVENT_SAMPLES["visitor.registered"], uuid },
        };
      },
      async postEvents(events) {
        return call(ingest.url, "POST", "/v1/events", { token: ingestToken, body: { events } });
      },
      async close() {
        await Promise.all(started.map((s) => s.stop()));
        await prisma.$disconnect();
        await bouncer.stop();
        await database.drop();
      },
    };
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    await bouncer.stop();
    await database.drop();
    throw err;
  }
}
