// Stops what global-setup.js started: the private Redis Cluster and Sentinel group, the embedded s3rver (and its temporary folder) and the
// run's database, and deletes every Redis key of the run (`vwtest-<run>-*`, see
// packages/testing/src/redis-keys.ts), saying how many a test left behind. Safe to call twice and
// after a partial setup.
import { Redis } from "ioredis";
import { dropDatabasesStartingWith } from "../scripts/lib/local-infra.mjs";

export default async function globalTeardown() {
  const stores = globalThis.__VW_TEST_REDIS_HA__ ?? [];
  globalThis.__VW_TEST_REDIS_HA__ = undefined;
  await Promise.all(stores.map((store) => store.stop()));
  const s3 = globalThis.__VW_TEST_S3RVER__;
  globalThis.__VW_TEST_S3RVER__ = undefined;
  if (s3) await s3.stop();
  const db = globalThis.__VW_TEST_DB__;
  globalThis.__VW_TEST_DB__ = undefined;
  if (db) await dropDatabasesStartingWith(db.adminUrl, db.dbPrefix);
  const run = globalThis.__VW_TEST_RUN__;
  globalThis.__VW_TEST_RUN__ = undefined;
  if (run) await deleteRunKeys(run);
}

async function deleteRunKeys(run) {
  const redis = new Redis(process.env.REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  const pattern = `vwtest-${run}-*`;
  try {
    await redis.connect();
    const left = new Set();
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) {
        await redis.unlink(...keys);
        for (const key of keys) left.add(key.split(":")[0]);
      }
    } while (cursor !== "0");
    if (left.size > 0) console.log(`[teardown] Redis keys left by tests under ${pattern}, now deleted; prefixes: ${[...left].slice(0, 10).join(", ")}`);
  } catch (err) {
    console.log(`[teardown] could not delete the run's Redis keys (${pattern}): ${err.message}`);
  } finally {
    redis.disconnect();
  }
}
