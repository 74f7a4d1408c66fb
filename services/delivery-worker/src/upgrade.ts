/**
 * `node dist/upgrade.js` (`pnpm --filter @vw/delivery-worker upgrade-queues`): the one-time queue
 * step of an upgrade to endpoint drains, run with the worker's environment (REDIS_*,
 * REDIS_KEY_PREFIX, QUEUE_SHARDS) once every process of the earlier version is stopped and the
 * migrations are applied, before the new version starts (see upgrade-queues.ts and the README's
 * "Upgrading"). `--shards=<n>[,<m>...]` cleans the layouts of those shard counts instead of
 * QUEUE_SHARDS' (an earlier version that ran with another count). Exits 1 when a job could not be
 * removed (an earlier worker still runs): run it again once it is stopped.
 */
import { closeRedisConnection, createRedisConnection, openDeliveryQueues } from "@vw/queues";
import { createLogger, loadConfigOrExit } from "@vw/service-kit";
import { loadConfig } from "./config.js";
import { removeEarlierJobs } from "./upgrade-queues.js";

const config = loadConfigOrExit("delivery-worker", () => loadConfig(process.env));
// Its report is this command's output, whatever LOG_LEVEL the worker runs with.
const logger = createLogger("delivery-worker-upgrade", "info", config.logFormat);
const shardsArg = process.argv.find((a) => a.startsWith("--shards="));
const layouts = shardsArg ? shardsArg.slice("--shards=".length).split(",").map(Number) : [config.queueShards];
const redis = createRedisConnection(config.redis, "worker");
let failed = false;
try {
  for (const count of layouts) {
    const queues = openDeliveryQueues(redis, config.redisKeyPrefix, count);
    try {
      const report = await removeEarlierJobs(queues, redis);
      logger.info(report, "deliveries queue: jobs of the earlier version removed");
      if (report.locked > 0) {
        failed = true;
        logger.error({ locked: report.locked, shards: count }, "some jobs are held by a running worker of the earlier version: stop it, then run this again");
      }
    } finally {
      await queues.close();
    }
  }
} catch (err) {
  failed = true;
  logger.error({ err: err as Error }, "upgrade of the deliveries queue failed; it can be run again");
} finally {
  await closeRedisConnection(redis);
}
process.exit(failed ? 1 : 0);
