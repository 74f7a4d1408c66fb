// Starts what the integration tests need besides the machine's PostgreSQL and Redis:
// a private database (migrated) and, unless S3_ENDPOINT is given, an embedded s3rver.
// The environment variables set here reach every test file (jest copies process.env into the
// workers). Everything started is recorded on globalThis and stopped in global-teardown.js.
import {
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  createDatabaseFromTemplate,
  ensureDatabase,
  migrate,
  randomSuffix,
  startS3rver,
} from "../scripts/lib/local-infra.mjs";
import { startRedisCluster, startSentinelGroup } from "../packages/testing/dist/index.js";
import globalTeardown from "./global-teardown.js";

export default async function globalSetup() {
  try {
    await start();
  } catch (err) {
    // jest skips the global teardown when the setup throws: undo what was started here.
    await globalTeardown().catch(() => {});
    throw err;
  }
}

async function start() {
  const suffix = `${process.pid}_${randomSuffix(3)}`;

  // Redis: every key of this run starts with `vwtest-<run>-` (packages/testing testKeyPrefix), so
  // the teardown removes exactly this run's keys, whatever another run does meanwhile.
  const run = randomSuffix(4);
  process.env.VW_TEST_RUN = run;
  globalThis.__VW_TEST_RUN__ = run;

  // PostgreSQL: a migrated template for this run (never connected to after its migration), the
  // run's shared database copied from it, and more copies for test files that need a database of
  // their own (packages/testing createTestDatabase: those running a reconciler, which reads every
  // pending delivery of its database). Test files on the shared one isolate by random slugs.
  const adminUrl = process.env.TEST_PG_ADMIN_URL || DEFAULT_PG_ADMIN_URL;
  const dbPrefix = `vw_test_${suffix}`;
  const template = `${dbPrefix}_tpl`;
  globalThis.__VW_TEST_DB__ = { adminUrl, dbPrefix };
  const { databaseUrl: templateUrl } = await ensureDatabase(adminUrl, template);
  await migrate(templateUrl);
  const { databaseUrl } = await createDatabaseFromTemplate(adminUrl, dbPrefix, template);
  process.env.DATABASE_URL = databaseUrl;
  process.env.TEST_PG_ADMIN_URL = adminUrl;
  process.env.VW_TEST_DB_TEMPLATE = template;

  process.env.REDIS_URL ||= DEFAULT_REDIS_URL;

  // The other two Redis topologies, one store each for the whole run (packages/testing
  // test-topologies.ts): a 3-primary, 3-replica Cluster and a Sentinel group (a primary, a replica
  // and three sentinels), from the machine's redis-server on free loopback ports.
  const [cluster, sentinel] = await Promise.all([startRedisCluster({ primaries: 3, replicasPerPrimary: 1 }), startSentinelGroup()]);
  globalThis.__VW_TEST_REDIS_HA__ = [cluster, sentinel];
  process.env.VW_TEST_REDIS_CLUSTER_NODES = cluster.seeds;
  process.env.VW_TEST_REDIS_SENTINELS = sentinel.sentinels;
  process.env.VW_TEST_REDIS_SENTINEL_MASTER = sentinel.masterName;

  // S3: embedded s3rver unless an external endpoint (MinIO, say) is given with its S3_* variables.
  if (!process.env.S3_ENDPOINT) {
    const s3 = await startS3rver({ bucket: `vw-test-${suffix.replace(/_/g, "-")}` });
    globalThis.__VW_TEST_S3RVER__ = s3;
    Object.assign(process.env, s3.env);
  }
}
