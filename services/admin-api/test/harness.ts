/**
 * Test harness of admin-api's integration tests: the app mounted in-process on an ephemeral port
 * against the real PostgreSQL and Redis of the test run (DATABASE_URL and REDIS_URL from the jest
 * global setup), a recording logger, random slugs so test files never see each other's rows, and
 * a random Redis key prefix so they never see each other's queue (obliterated by `close`).
 */
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testKeyPrefix } from "@vw/testing";
import type { AddressInfo, LookupFunction } from "node:net";
import type { Queue } from "bullmq";
import type { Express } from "express";
import { createPrismaClient, type PrismaClient } from "@vw/db";
import { QUEUE_NAMES, createRedisConnection, openQueue, openDeliveryQueues, type DeliveryQueues } from "@vw/queues";
import { closeServer, listen, type Logger } from "@vw/service-kit";
import {
  createDeliveryAgents,
  createSecretBox,
  destroyDeliveryAgents,
  generateSecretBoxKey,
  type DeliveryProxy,
  type EndpointUrlPolicy,
  type HostResolver,
  type SecretBox,
} from "@vw/webhook-core";
import { createAdminApp } from "../src/app.js";
import { conformance } from "./conformance.js";

export interface LogLine {
  level: string;
  fields: unknown;
  msg: unknown;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, or `undefined` for an empty body. */
  body: any;
  text: string;
}

export interface RequestOptions {
  /** Serialised as JSON with `Content-Type: application/json`, unless `rawBody` is given. */
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
  /** Bearer token to send; the harness's admin token by default, `null` for none. */
  token?: string | null;
}

/** How a harness's app is configured beyond the defaults. */
export interface AdminApiOptions {
  /** ENDPOINT_URL_POLICY; `public-https` (the production default) unless given. */
  endpointUrlPolicy?: EndpointUrlPolicy;
  /** DNS of the URL policy; by default nothing resolves (tests never use real DNS). */
  resolveHost?: HostResolver;
  /** `apiVersion` for endpoints created by this app (the contracts constant unless given). */
  currentApiVersion?: string;
  /** SECRETS_ENCRYPTION_KEY; a fresh random key unless given. */
  secretsEncryptionKey?: string;
  /** DELIVERY_TIMEOUT_MS of Test attempts; 5 s unless given. */
  deliveryTimeoutMs?: number;
  /** PUBLIC_ADMIN_URL; {@link PUBLIC_ADMIN_URL} (https) unless given. */
  publicAdminUrl?: string;
  /** DASHBOARD_FRAME_ANCESTORS; none unless given. */
  dashboardFrameAncestors?: string[];
  /** The dashboard's built files; a temporary folder with an index.html and one hashed asset unless given. */
  dashboardAssetsDir?: string;
  /** Clock of dashboard sessions; the system clock unless given. */
  now?: () => Date;
  /** MAX_ENDPOINTS_PER_WORLD and MAX_AUTH_ENDPOINTS_PER_WORLD; the production defaults unless given. */
  endpointQuotas?: { maxEndpoints: number; maxAuthEndpoints: number };
  /**
   * AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S (in ms); 10000 failures a minute unless given, so
   * tests that send many bad credentials on purpose are not throttled. The counters are in the
   * run's Redis under the harness's prefix either way.
   */
  authThrottle?: { maxFailures: number; windowMs: number };
  /** TRUST_PROXY; none unless given. */
  trustProxy?: number | string[] | false;
  /** DNS lookup of the Test action's connections; the system's unless given. */
  deliveryLookup?: LookupFunction;
  /** DELIVERY_PROXY_URL, parsed: the Test action's requests go through it; direct unless given. */
  deliveryProxy?: DeliveryProxy;
  /** ADMIN_TOKEN; a fresh random one unless given. */
  adminToken?: string;
  /** MAP_STORAGE_INTERNAL_URL (the room listing); PUBLIC_MAP_STORAGE_URL unless given. */
  mapStorageInternalUrl?: string;
}

export interface AdminApiHarness {
  baseUrl: string;
  /** The app under test (for `registeredRoutes`). */
  app: Express;
  adminToken: string;
  prisma: PrismaClient;
  /** The box sealing this app's endpoint secrets (to open what the database holds). */
  secretBox: SecretBox;
  logs: LogLine[];
  /** Prefix of every organization slug this harness creates (cleaned up by `close`). */
  slugPrefix: string;
  /** The app's delivery queue (its own random REDIS_KEY_PREFIX), to inspect the jobs Replay adds. */
  deliveryQueue: DeliveryQueues;
  /** The app's recovery queue, where recover adds its `recover.v1` job. */
  recoveryQueue: Queue;
  /** The random REDIS_KEY_PREFIX of this harness. */
  redisKeyPrefix: string;
  /** A fresh slug `<prefix><label>-<random>`. */
  slug(label?: string): string;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export const PUBLIC_MAP_STORAGE_URL = "https://maps.example.test";
export const PLAY_URL = "https://play.example.test";
export const PUBLIC_ADMIN_URL = "https://admin.example.test";

/** The stand-in dashboard build of {@link startAdminApi}: an index.html and one hashed asset. */
export const TEST_DASHBOARD_INDEX = '<!doctype html><html><head><script type="module" src="/dashboard/assets/index-Ab12Cd34.js"></script></head><body><div id="root"></div></body></html>';
export const TEST_DASHBOARD_ASSET = { path: "/assets/index-Ab12Cd34.js", body: "console.log('dashboard');" };

async function testDashboardDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "vw-dashboard-"));
  await mkdir(join(dir, "assets"));
  await writeFile(join(dir, "index.html"), TEST_DASHBOARD_INDEX);
  await writeFile(join(dir, TEST_DASHBOARD_ASSET.path), TEST_DASHBOARD_ASSET.body);
  return dir;
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

/** The default resolver of the harness: no host name resolves, so no test depends on real DNS. */
const resolveNothing: HostResolver = async (hostname) => {
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
};

export async function startAdminApi(options: AdminApiOptions = {}): Promise<AdminApiHarness> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error("DATABASE_URL is not set: run the tests through jest (test/global-setup.js)");
  const prisma = createPrismaClient(databaseUrl, { max: 4 });
  const adminToken = options.adminToken ?? `test-admin-${randomBytes(16).toString("hex")}`;
  const logs: LogLine[] = [];
  const secretBox = createSecretBox(options.secretsEncryptionKey ?? generateSecretBoxKey());
  const endpointUrlPolicy = options.endpointUrlPolicy ?? "public-https";
  const redis = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "producer");
  const redisKeyPrefix = testKeyPrefix("admin-");
  const deliveryQueue = openDeliveryQueues(redis, redisKeyPrefix);
  const recoveryQueue = openQueue(QUEUE_NAMES.recoveries, redis, redisKeyPrefix);
  const deliveryAgents = createDeliveryAgents(endpointUrlPolicy, { proxy: options.deliveryProxy ?? null, ...(options.deliveryLookup ? { lookup: options.deliveryLookup } : {}) });
  const ownDashboardDir = options.dashboardAssetsDir === undefined ? await testDashboardDir() : null;
  const app = createAdminApp({
    prisma,
    logger: recordingLogger(logs),
    adminToken,
    publicMapStorageUrl: `${PUBLIC_MAP_STORAGE_URL}/`,
    playUrl: PLAY_URL,
    secretBox,
    endpointUrlPolicy,
    resolveHost: options.resolveHost ?? resolveNothing,
    ...(options.currentApiVersion === undefined ? {} : { currentApiVersion: options.currentApiVersion }),
    deliveryQueue,
    recoveryQueue,
    deliveryAgents,
    deliveryTimeoutMs: options.deliveryTimeoutMs ?? 5000,
    publicAdminUrl: options.publicAdminUrl ?? PUBLIC_ADMIN_URL,
    dashboardFrameAncestors: options.dashboardFrameAncestors ?? [],
    dashboardAssetsDir: options.dashboardAssetsDir ?? ownDashboardDir ?? "",
    ...(options.now === undefined ? {} : { now: options.now }),
    ...(options.endpointQuotas === undefined ? {} : { endpointQuotas: options.endpointQuotas }),
    throttleRedis: redis,
    redisKeyPrefix,
    authThrottle: options.authThrottle ?? { maxFailures: 10_000, windowMs: 60_000 },
    trustProxy: options.trustProxy ?? false,
    ...(options.mapStorageInternalUrl === undefined ? {} : { mapStorageInternalUrl: options.mapStorageInternalUrl }),
  });
  const server = await listen(app, 0, "127.0.0.1");
  conformance.attach(server);
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const slugPrefix = `t${randomBytes(3).toString("hex")}-`;

  return {
    baseUrl,
    app,
    adminToken,
    prisma,
    secretBox,
    logs,
    slugPrefix,
    deliveryQueue,
    recoveryQueue,
    redisKeyPrefix,
    slug: (label = "s") => `${slugPrefix}${label}-${randomBytes(3).toString("hex")}`,
    async request(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const token = options.token === undefined ? adminToken : options.token;
      if (token !== null) headers["authorization"] = `Bearer ${token}`;
      let body: string | undefined = options.rawBody;
      if (body === undefined && options.body !== undefined) {
        body = JSON.stringify(options.body);
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
    },
    async close() {
      await prisma.organization.deleteMany({ where: { slug: { startsWith: slugPrefix } } });
      await closeServer(server);
      await deliveryQueue.obliterate({ force: true });
      await deliveryQueue.close();
      await recoveryQueue.obliterate({ force: true });
      await recoveryQueue.close();
      const counters = await redis.keys(`${redisKeyPrefix}:auth-failures:*`);
      if (counters.length > 0) await redis.del(...counters);
      await redis.quit();
      destroyDeliveryAgents(deliveryAgents);
      await prisma.$disconnect();
      if (ownDashboardDir !== null) await rm(ownDashboardDir, { recursive: true, force: true });
    },
  };
}
