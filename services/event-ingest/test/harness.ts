/**
 * Test harness of event-ingest's integration tests: the app mounted in-process on an ephemeral
 * port against the real PostgreSQL (DATABASE_URL from the jest global setup) and Redis of the
 * test run (REDIS_URL, or the run's Sentinel group or Cluster: `topology`), a random Redis key
 * prefix and random slugs per harness so test files never see each other's rows or jobs, and
 * helpers that create worlds and endpoints directly with Prisma.
 */
import { randomBytes } from "node:crypto";
import { deleteKeysUnder, redisReady, testKeyPrefix, testRedisEnv, type TestTopology } from "@vw/testing";
import type { AddressInfo } from "node:net";
import type { Job } from "bullmq";
import { CURRENT_API_VERSION, type WebhookSubscription } from "@vw/contracts";
import { createPgPool, createPrismaClient, type PgPool, type PrismaClient } from "@vw/db";
import { DrainSignals, DrainWakes, createRedisConnection, drainJobId, openDeliveryQueues, type DrainJobData, type DeliveryQueues, type RedisClient } from "@vw/queues";
import { closeServer, listen, parseEnv, readRedisTopology, type Logger } from "@vw/service-kit";
import { generateSecretBoxKey } from "@vw/webhook-core";
import type { Express } from "express";
import { pseudonymKey } from "../src/analytics-privacy.js";
import { AnalyticsIntake } from "../src/analytics.service.js";
import { ingestDatabase, type IngestDatabase } from "../src/database.js";
import { createIngestApp } from "../src/app.js";
import { conformance } from "./conformance.js";

export const PLAY_URL = "https://play.example.test";

export interface LogLine {
  level: string;
  fields: unknown;
  msg: unknown;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, or `undefined` for an empty or non-JSON body. */
  body: any;
  text: string;
}

export interface RequestOptions {
  /** Serialised as JSON with `Content-Type: application/json`, unless `rawBody` is given. */
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
  /** Bearer token to send; the harness's ingest token by default, `null` for none. */
  token?: string | null;
}

export interface IngestHarnessOptions {
  /** Redis of the app's producer connection; REDIS_URL by default (a dead address to test failures). */
  redisUrl?: string;
  /** The run's Redis to use instead (packages/testing test-topologies.ts); waits until it is ready. Not with `redisUrl`. */
  topology?: TestTopology;
  /** QUEUE_SHARDS of the deliveries queue; the platform's default unless given. */
  queueShards?: number;
  /** Mounts `POST /v1/analytics` with these ANALYTICS_BUFFER_MAX, ANALYTICS_BUFFER_MAX_PER_WORLD and ANALYTICS_BUFFER_MAX_BYTES_PER_WORLD; not mounted unless given. */
  analytics?: { bufferMax: number; worldBufferMax?: number; worldBufferMaxBytes?: number };
  /** ANALYTICS_EVENT_MAX_BYTES; the platform's default unless given. */
  analyticsEventMaxBytes?: number;
  /** Key prefix of the deliveries queue; a fresh random one (obliterated by `close`) unless given. */
  keyPrefix?: string;
  maxEventsPerRequest?: number;
  bodyLimit?: string | number;
  enqueueTimeoutMs?: number;
  /** AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S (ms); 10000 failures a minute unless given (tests send bad tokens on purpose). */
  authThrottle?: { maxFailures: number; windowMs: number };
  /** TRUST_PROXY; none unless given. */
  trustProxy?: number | string[] | false;
}

export interface TestWorld {
  id: string;
  organizationSlug: string;
  slug: string;
  /** `<org>/<world>`, as events name it. */
  ref: string;
}

export interface EndpointOptions {
  subscriptions: WebhookSubscription[];
  enabled?: boolean;
  format?: "current" | "legacy";
  apiVersion?: string;
}

export interface IngestHarness {
  /** The express app (route enumeration: `registeredRoutes`). */
  app: Express;
  baseUrl: string;
  token: string;
  prisma: PrismaClient;
  /** The app's pg pool (ended by `close`). */
  pool: PgPool;
  /** The app's one way to PostgreSQL over `pool` (database.ts), for parts a test builds itself. */
  db: IngestDatabase;
  redis: RedisClient;
  queue: DeliveryQueues;
  keyPrefix: string;
  logs: LogLine[];
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** `POST /v1/events` with `body`. */
  post(body: unknown, options?: Omit<RequestOptions, "body">): Promise<TestResponse>;
  /** A new organization and world (random slugs under this harness's prefix). */
  createWorld(options?: { customDomain?: string }): Promise<TestWorld>;
  /** A webhook endpoint row of `world`; returns its id. */
  createEndpoint(world: TestWorld, options: EndpointOptions): Promise<string>;
  /** Every job of the deliveries queue, whatever its state. */
  jobs(): Promise<Job<DrainJobData>[]>;
  /** The drain signals of the harness's deliveries queue (the service's own, for flags: `takeFlag`). */
  signals: DrainSignals;
  /** The drain job of an endpoint (`d-<endpointId>`), looked up in the endpoint's shard only; undefined when there is none. */
  drainJob(endpointId: string): Promise<Job<DrainJobData> | undefined>;
  /** Every drain job (`d-…`) of the deliveries queue, whatever its state. */
  drainJobs(): Promise<Job<DrainJobData>[]>;
  /** A started subscriber of the published wakes of lingering drains, as a worker has one (closed by `close`). */
  listenForWakes(): Promise<DrainWakes>;
  close(): Promise<void>;
}

/** A logger that keeps every line in memory, so tests can assert on what is (not) logged. */
function recordingLogger(logs: LogLine[]): Logger {
  const record =
    (level: string) =>
    (fields: unknown, msg?: unknown): void => {
      logs.push({ level, fields, msg });
    };
  const logger = {
    trace: record("trace"),
    debug: record("debug"),
    info: record("info"),
    warn: record("warn"),
    error: record("error"),
    fatal: record("fatal"),
    child: () => logger,
  };
  return logger as unknown as Logger;
}

export async function startIngest(options: IngestHarnessOptions = {}): Promise<IngestHarness> {
  const databaseUrl = process.env.DATABASE_URL;
  const redisUrl = options.redisUrl ?? process.env.REDIS_URL;
  if (!databaseUrl || !redisUrl) throw new Error("DATABASE_URL and REDIS_URL are not set: run the tests through jest (test/global-setup.js)");
  if (options.topology !== undefined && options.redisUrl !== undefined) throw new Error("give the harness a topology or a redisUrl, not both");
  const prisma = createPrismaClient(databaseUrl, { max: 4 });
  const pool = createPgPool(databaseUrl, { max: 4 });
  const db = ingestDatabase(pool);
  const target = options.topology === undefined ? redisUrl : parseEnv(testRedisEnv(options.topology), readRedisTopology);
  const redis: RedisClient = createRedisConnection(target, "producer");
  // A producer connection refuses commands until it is ready (a Cluster's until it knows its slots).
  if (options.topology !== undefined) await redisReady(redis);
  const ownsPrefix = options.keyPrefix === undefined;
  const keyPrefix = options.keyPrefix ?? testKeyPrefix("ingest-");
  const queue = openDeliveryQueues(redis, keyPrefix, options.queueShards);
  const logs: LogLine[] = [];
  // Failures of a deliberately dead Redis are expected; keep them off the console.
  redis.on("error", (err: Error) => logs.push({ level: "warn", fields: { err: err.message }, msg: "redis error" }));
  queue.on("error", (err: Error) => logs.push({ level: "warn", fields: { err: err.message }, msg: "queue error" }));

  const signals = new DrainSignals(queue);
  /** Subscribers of published wakes, each on a worker connection of its own (which, unlike a producer's, waits for Redis to be ready). */
  const wakeListeners: { wakes: DrainWakes; connection: RedisClient }[] = [];

  const token = `test-ingest-${randomBytes(16).toString("hex")}`;
  const app = createIngestApp({
    db,
    redis,
    queue,
    logger: recordingLogger(logs),
    ingestToken: token,
    playUrl: `${PLAY_URL}/`,
    redisKeyPrefix: keyPrefix,
    // Tests send bad tokens on purpose; throttling has its own test with its own limits.
    authThrottle: options.authThrottle ?? { maxFailures: 10_000, windowMs: 60_000 },
    ...(options.trustProxy === undefined ? {} : { trustProxy: options.trustProxy }),
    ...(options.maxEventsPerRequest === undefined ? {} : { maxEventsPerRequest: options.maxEventsPerRequest }),
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
    ...(options.enqueueTimeoutMs === undefined ? {} : { enqueueTimeoutMs: options.enqueueTimeoutMs }),
    ...(options.analyticsEventMaxBytes === undefined ? {} : { analyticsEventMaxBytes: options.analyticsEventMaxBytes }),
    ...(options.analytics === undefined
      ? {}
      : {
          analytics: new AnalyticsIntake(db, redis, recordingLogger(logs), {
            keyPrefix,
            pseudonymKey: pseudonymKey(null, generateSecretBoxKey()),
            ...options.analytics,
          }),
        }),
  });
  const server = await listen(app, 0, "127.0.0.1");
  conformance.attach(server);
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const slugPrefix = `t${randomBytes(3).toString("hex")}-`;
  const slug = (label: string) => `${slugPrefix}${label}-${randomBytes(3).toString("hex")}`;

  const request: IngestHarness["request"] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    const bearer = opts.token === undefined ? token : opts.token;
    if (bearer !== null) headers["authorization"] = `Bearer ${bearer}`;
    let body: string | undefined = opts.rawBody;
    if (body === undefined && opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
    const text = await res.text();
    let parsed: unknown;
    if (text !== "") {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  return {
    app,
    baseUrl,
    token,
    prisma,
    pool,
    db,
    redis,
    queue,
    keyPrefix,
    logs,
    request,
    post: (body, opts = {}) => request("POST", "/v1/events", { ...opts, body }),
    async createWorld(opts = {}) {
      const organization = await prisma.organization.create({ data: { slug: slug("org"), name: "Test organization" } });
      const world = await prisma.world.create({
        data: {
          organizationId: organization.id,
          slug: slug("w"),
          name: "Test world",
          adminEmails: ["admin@example.test"],
          customDomain: opts.customDomain ?? null,
        },
      });
      return { id: world.id, organizationSlug: organization.slug, slug: world.slug, ref: `${organization.slug}/${world.slug}` };
    },
    async createEndpoint(world, opts) {
      const enabled = opts.enabled ?? true;
      const endpoint = await prisma.webhookEndpoint.create({
        data: {
          worldId: world.id,
          url: "https://receiver.example.test/hook",
          subscriptions: opts.subscriptions,
          enabled,
          disabledReason: enabled ? null : "manual",
          disabledAt: enabled ? null : new Date(),
          format: opts.format ?? "current",
          apiVersion: opts.apiVersion ?? CURRENT_API_VERSION,
          secretSealed: null,
        },
      });
      return endpoint.id;
    },
    jobs: () => queue.getJobs(["waiting", "active", "delayed", "prioritized", "completed", "failed"]) as Promise<Job<DrainJobData>[]>,
    signals,
    drainJob: async (endpointId) => (await queue.queueFor(endpointId).getJob(drainJobId(endpointId))) as Job<DrainJobData> | undefined,
    drainJobs: async () =>
      ((await queue.getJobs(["waiting", "active", "delayed", "prioritized", "completed", "failed"])) as Job<DrainJobData>[]).filter((job) => job.id?.startsWith("d-")),
    async listenForWakes() {
      const connection = createRedisConnection(target, "worker");
      const wakes = new DrainWakes(connection, keyPrefix, (err) => logs.push({ level: "warn", fields: { err: err.message }, msg: "wake subscriber error" }));
      wakeListeners.push({ wakes, connection });
      await wakes.start();
      return wakes;
    },
    async close() {
      await Promise.all(
        wakeListeners.splice(0).map(async ({ wakes, connection }) => {
          await wakes.close();
          await connection.quit().catch(() => connection.disconnect());
        }),
      );
      await prisma.organization.deleteMany({ where: { slug: { startsWith: slugPrefix } } });
      await closeServer(server);
      if (redis.status === "ready") {
        if (ownsPrefix) await queue.obliterate({ force: true });
        // Scanned on every primary of a Cluster, where KEYS would see one node's keys only. A
        // prefix of the harness's own holds nobody else's keys: the drains' flags and windows and analytics' go too.
        await deleteKeysUnder(redis, ownsPrefix ? `${keyPrefix}:` : `${keyPrefix}:auth-failures:`);
        await queue.close();
        await redis.quit();
      } else {
        // A dead or closed connection: nothing to clean in Redis. Disconnecting an ended one
        // again would leave ioredis's 2 s stream-destroy timer behind.
        if (redis.status !== "end") redis.disconnect();
        await queue.close();
      }
      await Promise.all([prisma.$disconnect(), pool.end()]);
    },
  };
}
