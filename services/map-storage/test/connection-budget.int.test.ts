/**
 * map-storage holds to its connection budget under load: a real process with a small
 * DATABASE_POOL_MAX takes concurrent writes (each reserves its bytes in the world's storage count,
 * in PostgreSQL) and reads with several worlds' API keys, and PostgreSQL (pg_stat_activity, polled
 * throughout) never lists more of its connections than DATABASE_POOL_MAX, each named
 * `map-storage`. No timing is asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createPgPool, type PgPool, type PrismaClient } from "@vw/db";
import { Redis } from "ioredis";
import { testKeyPrefix, watchConnections } from "@vw/testing";
import { createTestWorld, rand, sampleWam, testPrisma, type TestWorld } from "./harness.js";
import { spawnMapStorage, type ServiceProcess } from "./processes.js";

const POOL_MAX = 2;
const prefix = `${testKeyPrefix("ms-budget-")}:`;
const pgPort = Number(new URL(process.env.DATABASE_URL as string).port || 5432);

let prisma: PrismaClient;
let observer: PgPool;
let worlds: TestWorld[];
let ms: ServiceProcess;

beforeAll(async () => {
  prisma = testPrisma();
  observer = createPgPool(process.env.DATABASE_URL as string, { max: 1 });
  worlds = await Promise.all([createTestWorld(prisma), createTestWorld(prisma), createTestWorld(prisma)]);
  ms = await spawnMapStorage({ REDIS_KEY_PREFIX: prefix, PLAY_URL: "https://play.example.com", DATABASE_POOL_MAX: String(POOL_MAX) });
}, 75_000);

afterAll(async () => {
  if (ms?.child.exitCode === null) await ms.stop();
  const redis = new Redis(process.env.REDIS_URL!);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
  await observer?.end();
  await prisma?.$disconnect();
});

describe("map-storage's connections under load", () => {
  it(`never exceed DATABASE_POOL_MAX (${POOL_MAX}), all named map-storage`, async () => {
    const watch = watchConnections(observer, ms.child.pid as number, pgPort);
    const requests = Array.from({ length: 90 }, (_, i) => async () => {
      const w = worlds[i % worlds.length]!;
      const url = `${ms.url}/${w.org}/${w.world}/rooms/${rand()}-${i}.wam`;
      // A refusal is kept with its problem document, so a failure says which rule answered.
      const put = await fetch(url, { method: "PUT", headers: { authorization: `Bearer ${w.token}` }, body: JSON.stringify(sampleWam()) });
      const putBody = await put.text();
      if (put.status !== 201 && put.status !== 200) return [`PUT ${put.status} ${putBody}`];
      const get = await fetch(url);
      const getBody = await get.text();
      return get.status === 200 ? [] : [`GET ${get.status} ${getBody}`];
    });
    const refused: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 30 }, async () => {
        while (next < requests.length) refused.push(...(await (requests[next++] as () => Promise<string[]>)()));
      }),
    );
    const seen = await watch.stop();

    expect(refused).toEqual([]);
    expect(seen.samples).toBeGreaterThan(0);
    expect(seen.max).toBeGreaterThan(1);
    expect(seen.max).toBeLessThanOrEqual(POOL_MAX);
    expect([...seen.applicationNames]).toEqual(["map-storage"]);
  }, 180_000);
});
