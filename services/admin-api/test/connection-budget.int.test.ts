/**
 * admin-api holds to its connection budget under load: a real process with a small
 * DATABASE_POOL_MAX takes concurrent admin reads and writes (Prisma, and the owners' runner: world
 * settings patches under the world's lock, endpoint creations under the quota lock, endpoint reads)
 * and Inbound API member lookups, and PostgreSQL (pg_stat_activity, polled throughout) never lists
 * more of its connections than DATABASE_POOL_MAX, each named `admin-api`. Issue 48: Prisma's pool
 * and a members pool used to sit side by side. No timing is asserted.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createPgPool, type PgPool } from "@vw/db";
import { closeRedisConnection, createRedisConnection } from "@vw/queues";
import { deleteKeysUnder, redisReady, spawnService, testKeyPrefix, watchConnections, type ServiceProcess } from "@vw/testing";
import { generateSecretBoxKey } from "@vw/webhook-core";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const POOL_MAX = 2;
const ADMIN_TOKEN = `budget-admin-${randomBytes(16).toString("hex")}`;

let admin: ServiceProcess;
let observer: PgPool;
const keyPrefix = testKeyPrefix("admin-budget-");
const pgPort = Number(new URL(process.env.DATABASE_URL as string).port || 5432);

beforeAll(async () => {
  observer = createPgPool(process.env.DATABASE_URL as string, { max: 1 });
  admin = await spawnService(
    serviceDir,
    (port) => ({
      DATABASE_URL: process.env.DATABASE_URL as string,
      DATABASE_POOL_MAX: String(POOL_MAX),
      REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      REDIS_KEY_PREFIX: keyPrefix,
      ADMIN_TOKEN,
      SECRETS_ENCRYPTION_KEY: generateSecretBoxKey(),
      ENDPOINT_URL_POLICY: "any",
      PUBLIC_ADMIN_URL: `http://127.0.0.1:${port}`,
    }),
    { readyTimeoutMs: 60_000 },
  );
}, 90_000);

afterAll(async () => {
  await admin?.stop();
  await observer?.end();
  const redis = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "producer");
  try {
    await redisReady(redis);
    await deleteKeysUnder(redis, keyPrefix);
  } finally {
    await closeRedisConnection(redis);
  }
});

async function call(method: string, path: string, body?: unknown, token = ADMIN_TOKEN): Promise<{ status: number; body: any }> {
  const res = await fetch(`${admin.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? null : JSON.parse(text) };
}

describe("admin-api's connections under load", () => {
  it(`never exceed DATABASE_POOL_MAX (${POOL_MAX}), all named admin-api`, async () => {
    const org = `budget-${randomBytes(4).toString("hex")}`;
    expect((await call("POST", "/admin/v1/organizations", { slug: org, name: "Budget" })).status).toBe(201);
    expect((await call("POST", `/admin/v1/organizations/${org}/worlds`, { slug: "w", name: "W", adminEmails: ["ops@example.com"] })).status).toBe(201);
    const key = await call("POST", `/admin/v1/worlds/${org}/w/api-keys`, {});
    expect(key.status).toBe(201);
    const apiKey = key.body.token as string;
    const world = `/admin/v1/worlds/${org}/w`;

    const pid = admin.child.pid as number;
    const watch = watchConnections(observer, pid, pgPort);
    const requests: (() => Promise<{ status: number }>)[] = [];
    for (let i = 0; i < 160; i += 1) {
      switch (i % 5) {
        case 0:
          requests.push(() => call("POST", `${world}/endpoints`, { url: `https://receiver.example.test/${i}`, subscriptions: ["visitor"] }));
          break;
        case 1:
          requests.push(() => call("GET", `${world}/endpoints?limit=5`));
          break;
        case 2:
          requests.push(() => call("PATCH", world, { name: `W ${i}` }));
          break;
        case 3:
          requests.push(() => call("GET", `/api/v1/worlds/w/members/${randomUUID()}`, undefined, apiKey));
          break;
        default:
          requests.push(() => call("GET", world));
      }
    }
    const statuses: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 30 }, async () => {
        while (next < requests.length) statuses.push((await (requests[next++] as () => Promise<{ status: number }>)()).status);
      }),
    );
    const seen = await watch.stop();

    // Served: 201/200, 404 for the unknown members, 409 once the world's endpoint quota is reached; never a 5xx.
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    expect(seen.samples).toBeGreaterThan(0);
    expect(seen.max).toBeGreaterThan(1);
    expect(seen.max).toBeLessThanOrEqual(POOL_MAX);
    expect([...seen.applicationNames]).toEqual(["admin-api"]);
  }, 180_000);
});
