/**
 * The Redis topologies a test run offers: the machine's standalone Redis (REDIS_URL), and one
 * private Sentinel group and one private 3-primary Cluster that the run's global setup starts on
 * free loopback ports (test/global-setup.js) and stops at the end. A test file picks one by name
 * and gets the variables a service would be configured with; every file on one topology shares
 * that group or Cluster, isolated by its key prefix as on the standalone Redis.
 */

/** A Redis topology of the test run. */
export type TestTopology = "standalone" | "sentinel" | "cluster";

/** The topologies besides standalone, which representative tests also run on. */
export const HA_TEST_TOPOLOGIES: readonly TestTopology[] = ["sentinel", "cluster"];

/**
 * The variables that point a service at the run's store of that topology (exactly one topology:
 * the others' variables blank, REDIS_URL included). Throws when the run started none (a jest run
 * without the global setup).
 */
export function testRedisEnv(topology: TestTopology): Record<string, string> {
  const blank = { REDIS_URL: "", REDIS_SENTINELS: "", REDIS_SENTINEL_MASTER: "", REDIS_CLUSTER_NODES: "" };
  const need = (name: string): string => {
    const value = process.env[name];
    if (!value) throw new Error(`${name} is not set: the test run's global setup (test/global-setup.js) starts the ${topology} store`);
    return value;
  };
  switch (topology) {
    case "standalone":
      return { ...blank, REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" };
    case "sentinel":
      return { ...blank, REDIS_SENTINELS: need("VW_TEST_REDIS_SENTINELS"), REDIS_SENTINEL_MASTER: need("VW_TEST_REDIS_SENTINEL_MASTER") };
    case "cluster":
      return { ...blank, REDIS_CLUSTER_NODES: need("VW_TEST_REDIS_CLUSTER_NODES") };
  }
}
