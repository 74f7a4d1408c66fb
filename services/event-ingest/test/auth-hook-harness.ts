/**
 * Harness of the auth-hook integration tests: event-ingest mounted in-process with its
 * AuthHookService (ENDPOINT_URL_POLICY any, a short AUTH_HOOK_TIMEOUT_MS, a fresh secret box)
 * against the real PostgreSQL and Redis of the test run (REDIS_URL, or the run's Sentinel group or
 * Cluster: `topology`); worlds and endpoints are created with Prisma under random slugs and
 * removed by `close`.
 */
import { randomBytes } from "node:crypto";
import { deleteKeysUnder, redisReady, testKeyPrefix, testRedisEnv, type TestTopology } from "@vw/testing";
import type { AddressInfo } from "node:net";
import { CURRENT_API_VERSION, type IdentityProvider, type WebhookSubscription } from "@vw/contracts";
import { createPgPool, createPrismaClient, type PrismaClient } from "@vw/db";
import { createRedisConnection, openDeliveryQueues, type RedisClient } from "@vw/queues";
import { closeServer, listen, parseEnv, readRedisTopology, type Logger } from "@vw/service-kit";
import { createDeliveryAgents, createSecretBox, destroyDeliveryAgents, generateSecretBoxKey, type SecretBox } from "@vw/webhook-core";
import { ingestDatabase } from "../src/database.js";
import { createIngestApp } from "../src/app.js";
import { conformance } from "./conformance.js";
import { AuthHookService, type HookTarget } from "../src/auth-hook.service.js";
import { WorldSettingsCache, WorldSettingsListener } from "../src/world-settings-cache.js";

export const PLAY_URL = "https://play.example.test";

export interface HookWorld {
  id: string;
  ref: string;
  organizationSlug: string;
  slug: string;
}

export interface HookEndpointOptions {
  url: string;
  subscriptions?: WebhookSubscription[];
  enabled?: boolean;
  format?: "current" | "legacy";
  /** The displayed `whsec_` secret, sealed into the row; null for none. */
  secret: string | null;
  createdAt?: Date;
}

export interface HookHarness {
  baseUrl: string;
  token: string;
  prisma: PrismaClient;
  hook: AuthHookService;
  /** The world-settings cache and its listener, when started with `cache: true`. */
  cache: WorldSettingsCache<HookTarget> | null;
  listener: WorldSettingsListener | null;
  secretBox: SecretBox;
  /** The app's Redis connection and key prefix (its failed-authentication counters). */
  redis: RedisClient;
  keyPrefix: string;
  logs: { level: string; fields: unknown; msg: unknown }[];
  post(body: unknown, token?: string | null): Promise<{ status: number; headers: Headers; body: any; ms: number }>;
  createWorld(identityProviders?: IdentityProvider[]): Promise<HookWorld>;
  createEndpoint(world: HookWorld, options: HookEndpointOptions): Promise<string>;
  close(): Promise<void>;
}

function recordingLogger(logs: HookHarness["logs"]): Logger {
  const record = (level: string) => (fields: unknown, msg?: unknown) => void logs.push({ level, fields, msg });
  const logger = { trace: record("trace"), debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error"), fatal: record("fatal"), child: () => logger };
  return logger as unknown as Logger;
}

export interface HookHarnessOptions {
  timeoutMs: number;
  historyFlushMs?: number;
  cache?: boolean;
  monotonic?: () => number;
  /** The run's Redis to use (packages/testing test-topologies.ts); the standalone one by default. */
  topology?: TestTopology;
}

export async function startHookHarness(options: HookHarnessOptions): Promise<HookHarness> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error("DATABASE_URL is not set: run the tests through jest");
  const prisma = createPrismaClient(databaseUrl, { max: 4 });
  const redis = createRedisConnection(parseEnv(testRedisEnv(options.topology ?? "standalone"), readRedisTopology), "producer");
  // A producer connection refuses commands until it is ready (a Cluster's until it knows its slots).
  await redisReady(redis);
  const keyPrefix = testKeyPrefix("hook-");
  const queue = openDeliveryQueues(redis, keyPrefix);
  const logs: HookHarness["logs"] = [];
  const logger = recordingLogger(logs);
  const secretBox = createSecretBox(generateSecretBoxKey());
  const agents = createDeliveryAgents("any");
  const pool = createPgPool(databaseUrl, { max: 2 });
  const cache = options.cache === true ? new WorldSettingsCache<HookTarget>() : null;
  // A slow first reconnect: the test that cuts the LISTEN connection works while it is down.
  const listener = cache === null ? null : new WorldSettingsListener(databaseUrl, cache, logger, { retryBaseMs: 3000 });
  await listener?.start();
  // One way to PostgreSQL for the hook and the app, as in main.ts.
  const db = ingestDatabase(pool);
  const hook = new AuthHookService(db, {
    ...(cache === null ? {} : { cache }), playUrl: `${PLAY_URL}/`, secretBox, agents, timeoutMs: options.timeoutMs, logger,
    ...(options.historyFlushMs === undefined ? {} : { historyFlushMs: options.historyFlushMs }),
    ...(options.monotonic === undefined ? {} : { monotonic: options.monotonic }),
  });
  const token = `test-ingest-${randomBytes(16).toString("hex")}`;
  const app = createIngestApp({ db, redis, queue, logger, ingestToken: token, playUrl: PLAY_URL, authHook: hook, redisKeyPrefix: keyPrefix });
  const server = await listen(app, 0, "127.0.0.1");
  conformance.attach(server);
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const slugPrefix = `h${randomBytes(3).toString("hex")}-`;
  const slug = (label: string) => `${slugPrefix}${label}-${randomBytes(3).toString("hex")}`;

  return {
    baseUrl,
    token,
    prisma,
    hook,
    cache,
    listener,
    secretBox,
    redis,
    keyPrefix,
    logs,
    async post(body, bearer = token) {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (bearer !== null) headers["authorization"] = `Bearer ${bearer}`;
      const start = performance.now();
      const res = await fetch(`${baseUrl}/v1/auth-hook`, { method: "POST", headers, body: JSON.stringify(body) });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text === "" ? undefined : JSON.parse(text), ms: performance.now() - start };
    },
    async createWorld(identityProviders = []) {
      const organization = await prisma.organization.create({ data: { slug: slug("org"), name: "Hook test" } });
      const world = await prisma.world.create({
        data: { organizationId: organization.id, slug: slug("w"), name: "Hook world", adminEmails: ["admin@example.test"], identityProviders: identityProviders.map((p) => ({ ...p })) },
      });
      return { id: world.id, ref: `${organization.slug}/${world.slug}`, organizationSlug: organization.slug, slug: world.slug };
    },
    async createEndpoint(world, opts) {
      const enabled = opts.enabled ?? true;
      const endpoint = await prisma.webhookEndpoint.create({
        data: {
          worldId: world.id,
          url: opts.url,
          subscriptions: opts.subscriptions ?? ["auth"],
          enabled,
          disabledReason: enabled ? null : "manual",
          disabledAt: enabled ? null : new Date(),
          format: opts.format ?? "current",
          apiVersion: CURRENT_API_VERSION,
          secretSealed: opts.secret === null ? null : secretBox.seal(opts.secret),
          ...(opts.createdAt ? { createdAt: opts.createdAt } : {}),
        },
      });
      return endpoint.id;
    },
    async close() {
      await closeServer(server);
      await hook.drain();
      await listener?.stop();
      await pool.end();
      await prisma.organization.deleteMany({ where: { slug: { startsWith: slugPrefix } } });
      destroyDeliveryAgents(agents);
      // The hook never queues, but opening the queue wrote its meta key.
      await queue.obliterate({ force: true });
      await queue.close();
      // Scanned on every primary of a Cluster, where KEYS would see one node's keys only.
      await deleteKeysUnder(redis, `${keyPrefix}:auth-failures:`);
      await redis.quit();
      await prisma.$disconnect();
    },
  };
}
