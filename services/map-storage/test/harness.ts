import { randomBytes } from "node:crypto";
import { deleteKeysUnder, redisReady, testKeyPrefix } from "@vw/testing";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { createPrismaClient, generateApiKey, type PrismaClient } from "@vw/db";
import { closeServer, createLogger, listen } from "@vw/service-kit";
import type { Express } from "express";
import { createRedisConnection } from "@vw/queues/redis-connection";
import { composeMapStorage, type MapStorageOverrides } from "../src/compose.js";
import { conformance } from "./conformance.js";
import { loadConfig } from "../src/config.js";
import { createS3Client } from "../src/storage/s3-object-store.js";
import type { ObjectStore } from "../src/storage/object-store.js";

export const rand = (n = 4) => randomBytes(n).toString("hex");

/** A world with an API key, created straight in the test database. */
export interface TestWorld {
  org: string;
  world: string;
  token: string;
  keyId: string;
  worldId: string;
}

export async function createTestWorld(prisma: PrismaClient, customDomain: string | null = null): Promise<TestWorld> {
  const org = `org-${rand()}`;
  const world = `world-${rand()}`;
  const o = await prisma.organization.create({ data: { slug: org, name: org } });
  const w = await prisma.world.create({
    data: { slug: world, name: world, organizationId: o.id, adminEmails: ["admin@example.com"], customDomain },
  });
  const key = generateApiKey();
  const k = await prisma.apiKey.create({
    data: { worldId: w.id, name: "test", tokenHash: key.tokenHash, tokenPrefix: key.tokenPrefix },
  });
  return { org, world, token: key.token, keyId: k.id, worldId: w.id };
}

/** Counts calls that reach the object store, to prove a refused request never touched it. */
export class CountingStore implements ObjectStore {
  calls = 0;
  /** Calls that change the bucket (put, delete). */
  writes = 0;
  /** Keys whose content was read (get, open), in order. */
  reads: string[] = [];
  /** When set, every delete fails with it (a process dying between an upload's writes and its deletions). */
  failDeletes: Error | undefined;
  constructor(readonly inner: ObjectStore) {}
  get(key: string, maxBytes?: number) { this.calls++; this.reads.push(key); return this.inner.get(key, maxBytes); }
  open(key: string) { this.calls++; this.reads.push(key); return this.inner.open(key); }
  getStream(key: string) { this.calls++; return this.inner.getStream(key); }
  head(key: string) { this.calls++; return this.inner.head(key); }
  list(...a: Parameters<ObjectStore["list"]>) { this.calls++; return this.inner.list(...a); }
  put(...a: Parameters<ObjectStore["put"]>) { this.calls++; this.writes++; return this.inner.put(...a); }
  putStream(...a: Parameters<ObjectStore["putStream"]>) { this.calls++; this.writes++; return this.inner.putStream(...a); }
  delete(key: string) {
    this.calls++;
    if (this.failDeletes) return Promise.reject(this.failDeletes);
    this.writes++;
    return this.inner.delete(key);
  }
  ping() { return this.inner.ping(); }
}

export interface RunningMapStorage {
  baseUrl: string;
  /** The app under test (for `registeredRoutes`). */
  app: Express;
  store: CountingStore;
  redisPrefix: string;
  /** The service's log lines at `warn` and above, parsed (what an operator's log would show). */
  logs: Record<string, unknown>[];
  close(): Promise<void>;
}

/** Starts map-storage in-process on an ephemeral port against the real PostgreSQL, Redis and S3. */
export async function startMapStorage(
  env: Record<string, string> = {},
  overrides: Omit<MapStorageOverrides, "wrapStore"> = {},
): Promise<RunningMapStorage> {
  const redisPrefix = env.REDIS_KEY_PREFIX ?? `${testKeyPrefix("ms-")}:`;
  // Tests send bad keys on purpose: throttling has its own test with its own AUTH_FAILURES_MAX.
  const config = loadConfig({ ...process.env, LOG_LEVEL: "silent", PLAY_URL: "https://play.example.com", AUTH_FAILURES_MAX: "10000", ...env, REDIS_KEY_PREFIX: redisPrefix });
  const prisma = createPrismaClient(config.database);
  // The service's own connection for the topology of `env` (REDIS_URL of the run by default):
  // a producer's, which refuses commands until it is ready, so the harness waits for that.
  const redis = createRedisConnection(config.redis, "producer");
  await redisReady(redis);
  const s3 = createS3Client(config.s3);
  let store!: CountingStore;
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line.trim() !== "") logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const { app } = composeMapStorage(
    config,
    { prisma, redis, s3, logger: createLogger("map-storage-test", "warn", "json", sink) },
    { ...overrides, wrapStore: (s) => (store = new CountingStore(s)) },
  );
  const server: Server = await listen(app, 0, "127.0.0.1", undefined, { requestTimeoutMs: config.requestTimeoutMs });
  conformance.attach(server);
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    app,
    store,
    redisPrefix,
    logs,
    async close() {
      await closeServer(server);
      await deleteKeysUnder(redis, redisPrefix);
      await redis.quit();
      await prisma.$disconnect();
      s3.destroy();
    },
  };
}

export const testPrisma = () => createPrismaClient(process.env.DATABASE_URL!);

/** A WAM file as the spec shows it. */
export function sampleWam(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    version: "2.1.0",
    mapUrl: "https://maps.example.com/office.tmj",
    entities: {},
    areas: [],
    entityCollections: [{ url: "https://maps.example.com/collections/furniture.json", type: "file" }],
    metadata: { name: "Office", description: "Our office", thumbnail: "https://maps.example.com/thumb.png", copyright: "CC-BY" },
    ...extra,
  };
}
