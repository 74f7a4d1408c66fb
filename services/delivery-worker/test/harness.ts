/**
 * In-process harness of the delivery worker's integration tests: a database of the test file's own
 * on the real PostgreSQL of the run (copied from the run's migrated template: the worker's
 * reconciler reads every pending delivery of its database), the real Redis under a random key prefix, the
 * worker built by `startDeliveryWorker` with a short retry schedule, loopback receivers that
 * verify like a customer's, and an SMTP sink. Deliveries are created the way event-ingest and
 * admin-api create them (the delivery log, then a wake of the endpoint), so these tests exercise
 * the worker alone.
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { LookupFunction } from "node:net";
import { createPgPool, createPrismaClient, DeliveryHistory, DeliveryLog, newDeliveryId, prismaRunner, type DeliverySummary, type LogDeliveryStatus, type PrismaClient } from "@vw/db";
import { parseEnv, readRedisTopology } from "@vw/service-kit";
import { DrainSignals, createRedisConnection, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import type { Logger } from "@vw/service-kit";
import { createTestDatabase, deleteKeysUnder, eventually, redisReady, testRedisEnv, type TestTopology, startSmtpSink, startWebhookReceiver, testKeyPrefix, type SmtpSink, type WebhookReceiver } from "@vw/testing";
import { headerNamesOf } from "@vw/contracts";
import { buildEnvelope, createSecretBox, generateSecret, generateSecretBoxKey, sealEndpointHeaders, type EndpointUrlPolicy, type SecretBox } from "@vw/webhook-core";
import { startDeliveryWorker, type DeliveryWorker } from "../src/compose.js";
import { smtpTransport } from "../src/mailer.js";
import type { RedisClient } from "@vw/queues";

/** Requests held at once, and the most seen: one receiver's, or shared by several. */
export class InFlight {
  now = 0;
  most = 0;
}

/** A receiver answering 200 after `delayMs`, counting the requests it holds at once in `count`. */
export async function countingReceiver(delayMs: number, count = new InFlight()): Promise<{ receiver: WebhookReceiver; count: InFlight }> {
  const receiver = await startWebhookReceiver({
    answer: (_req, res) => {
      count.now += 1;
      count.most = Math.max(count.most, count.now);
      setTimeout(() => {
        count.now -= 1;
        res.statusCode = 200;
        res.end();
      }, delayMs);
    },
  });
  return { receiver, count };
}

/** A logger that keeps nothing (tests assert on rows, requests and mails). */
export const silentLogger: Logger = (() => {
  const noop = (): void => undefined;
  const logger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, fatal: noop, child: () => logger, level: "silent" };
  return logger as unknown as Logger;
})();

export interface HarnessOptions {
  retryDelays?: number[];
  disableAfterFailures?: number;
  deliveryTimeoutMs?: number;
  endpointUrlPolicy?: EndpointUrlPolicy;
  endpointConcurrency?: number;
  deliveryConcurrency?: number;
  /** RETRY_AFTER_MAX_S in ms; the service's default (6 h) unless given. */
  retryAfterMaxMs?: number;
  random?: () => number;
  now?: () => Date;
  /** False: no worker in this process (a test spawns worker processes itself). Default true. */
  inProcessWorker?: boolean;
  /** QUEUE_SHARDS of the worker and of `deliveries` (default: the platform's default). */
  queueShards?: number;
  /** The run's Redis to use (packages/testing test-topologies.ts); the standalone one by default. */
  topology?: TestTopology;
  /** The in-process worker's reconciler (RECONCILE_INTERVAL_MS and its marker check); default: as in production. */
  reconcile?: { sweepIntervalMs: number; checkIntervalMs?: number } | null;
  /** DNS lookup of the deliveries' connections; the system's unless given. */
  deliveryLookup?: LookupFunction;
  /** DRAIN_LINGER_MS of the in-process worker; the service's default unless given. */
  drainLingerMs?: number;
}

export interface TestEndpoint {
  id: string;
  worldId: string;
  secret: string | null;
}

export interface Harness {
  /** This file's own database (see the file comment). */
  databaseUrl: string;
  prisma: PrismaClient;
  redis: RedisClient;
  keyPrefix: string;
  secretBox: SecretBox;
  secretsKey: string;
  smtp: SmtpSink;
  /** The in-process worker (throws when the harness was started without one). */
  worker: DeliveryWorker;
  /** The deliveries queue's shards (a producer handle); `queueFor(endpointId)` is an endpoint's shard queue. */
  deliveries: DeliveryQueues;
  /** The drain signals of `deliveries` (wake endpoints as producers do). */
  signals: DrainSignals;
  /** The delivery as the history shows it (its status among others), or null. */
  delivery(endpointId: string, deliveryId: string): Promise<DeliverySummary | null>;
  /**
   * Waits until the delivery's status is one of `statuses` (default: any final one), and resolves
   * with it as the history shows it.
   */
  settled(endpointId: string, deliveryId: string, statuses?: readonly LogDeliveryStatus[], timeoutMs?: number): Promise<DeliverySummary>;
  createWorld(options?: { adminEmails?: string[] }): Promise<{ id: string; slug: string; organizationSlug: string }>;
  createEndpoint(
    worldId: string,
    options: { url: string; format?: "current" | "legacy"; withSecret?: boolean; subscriptions?: string[]; rateLimitPerSecond?: number | null; headers?: Record<string, string> },
  ): Promise<TestEndpoint>;
  /** Stores a delivery the way event-ingest does and wakes its endpoint (unless `wake: false`); returns the deliveryId. */
  seedDelivery(endpoint: TestEndpoint, options?: { type?: string; data?: unknown; test?: boolean; wake?: boolean }): Promise<string>;
  /** Stores `n` visitor.registered deliveries of the endpoint in one statement (woken with `wake`); their ids. */
  storeDeliveries(endpoint: TestEndpoint, n: number, options?: { wake?: boolean }): Promise<string[]>;
  /** Wakes endpoints, as a producer does after its commit. */
  wake(endpointIds: readonly string[]): Promise<void>;
  /**
   * Environment for event-ingest or delivery-worker run as processes against this harness (same
   * database, Redis prefix and secrets key), with the test defaults: `ENDPOINT_URL_POLICY=any`,
   * `RETRY_DELAYS=100ms`, a century of retention (the test database is shared: other files' old
   * rows stay) and `LOG_LEVEL=error`; `extra` adds or overrides.
   */
  processEnv(extra?: Record<string, string>): Record<string, string>;
  close(): Promise<void>;
}

/** Starts a harness; call `close` in afterAll. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const database = await createTestDatabase();
  const databaseUrl = database.url;
  const redisEnv = testRedisEnv(options.topology ?? "standalone");
  const prisma = createPrismaClient(databaseUrl, { max: 5 });
  const pool = createPgPool(databaseUrl, { max: 3 });
  const redis = createRedisConnection(parseEnv(redisEnv, readRedisTopology), "worker");
  await redisReady(redis);
  const keyPrefix = testKeyPrefix("worker-");
  const secretsKey = generateSecretBoxKey();
  const secretBox = createSecretBox(secretsKey);
  const smtp = await startSmtpSink();
  const mail = smtpTransport(smtp.url);
  const worker = options.inProcessWorker === false ? null : await startDeliveryWorker({
    pool,
    connection: redis,
    keyPrefix,
    ...(options.queueShards === undefined ? {} : { queueShards: options.queueShards }),
    logger: silentLogger,
    secretBox,
    endpointUrlPolicy: options.endpointUrlPolicy ?? "any",
    deliveryTimeoutMs: options.deliveryTimeoutMs ?? 2000,
    retryDelays: options.retryDelays ?? [100, 200, 300],
    disableAfterFailures: options.disableAfterFailures ?? 50,
    deliveryConcurrency: options.deliveryConcurrency ?? 50,
    endpointConcurrency: options.endpointConcurrency ?? 10,
    ...(options.retryAfterMaxMs === undefined ? {} : { retryAfterMaxMs: options.retryAfterMaxMs }),
    // The retention job runs at start-up; the database is shared by every test file, so the
    // in-process workers keep a century of history and only retention tests delete anything.
    retentionDays: 36_500,
    partitionsAheadDays: 7,
    retentionIntervalMs: 3_600_000,
    jobLockMs: 30_000,
    mailTransport: mail,
    mailFrom: "Webhooks <webhooks@test.local>",
    random: options.random,
    now: options.now,
    reconcile: options.reconcile === undefined ? { sweepIntervalMs: 30_000 } : options.reconcile,
    ...(options.deliveryLookup ? { deliveryLookup: options.deliveryLookup } : {}),
    ...(options.drainLingerMs === undefined ? {} : { drainLingerMs: options.drainLingerMs }),
  });

  const deliveries = openDeliveryQueues(redis, keyPrefix, options.queueShards);
  const signals = new DrainSignals(deliveries);
  const history = new DeliveryHistory(prismaRunner(prisma));

  const organizationIds: string[] = [];
  return {
    databaseUrl,
    prisma,
    redis,
    keyPrefix,
    secretBox,
    secretsKey,
    smtp,
    get worker(): DeliveryWorker {
      if (worker === null) throw new Error("this harness runs no worker in-process");
      return worker;
    },
    deliveries,
    signals,
    delivery: (endpointId, deliveryId) => history.find(endpointId, deliveryId),
    settled(endpointId, deliveryId, statuses = ["delivered", "failed", "skipped"], timeoutMs = 20_000) {
      return eventually(
        `delivery ${deliveryId} ${statuses.join(" or ")}`,
        async () => {
          const row = await history.find(endpointId, deliveryId);
          return row !== null && statuses.includes(row.status) ? row : null;
        },
        { timeoutMs },
      );
    },
    async createWorld({ adminEmails = ["owner@example.com", "ops@example.com"] } = {}) {
      const suffix = randomBytes(5).toString("hex");
      const organization = await prisma.organization.create({ data: { slug: `dw-${suffix}`, name: `Org ${suffix}` } });
      organizationIds.push(organization.id);
      const world = await prisma.world.create({
        data: { organizationId: organization.id, slug: `world-${suffix}`, name: `World ${suffix}`, adminEmails },
      });
      return { id: world.id, slug: world.slug, organizationSlug: organization.slug };
    },
    async createEndpoint(worldId, { url, format = "current", withSecret = true, subscriptions = ["visitor", "recording", "consent"], rateLimitPerSecond = null, headers = {} }) {
      const secret = withSecret ? generateSecret() : null;
      const row = await prisma.webhookEndpoint.create({
        data: {
          worldId,
          url,
          subscriptions,
          format,
          apiVersion: "2026-11-01",
          secretSealed: secret === null ? null : secretBox.seal(secret),
          rateLimitPerSecond,
          // Stored as admin-api stores them.
          headersSealed: sealEndpointHeaders(secretBox, headers),
          headerNames: headerNamesOf(headers),
        },
      });
      return { id: row.id, worldId, secret };
    },
    async seedDelivery(endpoint, { type = "visitor.registered", data, test = false, wake = true } = {}) {
      const deliveryId = newDeliveryId();
      const body = buildEnvelope({
        deliveryId,
        apiVersion: "2026-11-01",
        type,
        timestamp: new Date().toISOString(),
        world: { slug: "lobby", url: "https://play.example.test/@/acme/lobby" },
        data: data ?? { uuid: randomUUID(), name: "Ada", email: "ada@example.com", via: "sso" },
        test,
      });
      await new DeliveryLog(prismaRunner(prisma)).create([{ id: deliveryId, endpointId: endpoint.id, worldId: endpoint.worldId, type, body, test }]);
      if (wake) await signals.wake([endpoint.id]);
      return deliveryId;
    },
    async storeDeliveries(endpoint, n, { wake = false } = {}) {
      const rows = Array.from({ length: n }, () => {
        const id = newDeliveryId();
        const body = buildEnvelope({
          deliveryId: id,
          apiVersion: "2026-11-01",
          type: "visitor.registered",
          timestamp: new Date().toISOString(),
          world: { slug: "lobby", url: "https://play.example.test/@/acme/lobby" },
          data: { uuid: id, name: "Ada", email: "ada@example.com", via: "sso" },
          test: false,
        });
        return { id, endpointId: endpoint.id, worldId: endpoint.worldId, type: "visitor.registered", body };
      });
      await new DeliveryLog(prismaRunner(prisma)).create(rows);
      if (wake) await signals.wake([endpoint.id]);
      return rows.map((r) => r.id);
    },
    wake: async (endpointIds) => void (await signals.wake(endpointIds)),
    processEnv(extra = {}) {
      return {
        DATABASE_URL: databaseUrl,
        ...redisEnv,
        REDIS_KEY_PREFIX: keyPrefix,
        SECRETS_ENCRYPTION_KEY: secretsKey,
        ENDPOINT_URL_POLICY: "any",
        RETRY_DELAYS: "100ms",
        DELIVERY_RETENTION_DAYS: "36500",
        LOG_LEVEL: "error",
        ...extra,
      };
    },
    async close() {
      await worker?.close();
      await deliveries.close();
      // Every key of the file (queues, scheduler, analytics, markers) starts with its prefix.
      await deleteKeysUnder(redis, `${keyPrefix}:`);
      await prisma.organization.deleteMany({ where: { id: { in: organizationIds } } });
      mail.close();
      await smtp.close();
      await redis.quit();
      await prisma.$disconnect();
      await pool.end();
      await database.drop();
    },
  };
}
