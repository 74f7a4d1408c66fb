import { randomBytes } from "node:crypto";

/**
 * A fresh Redis key prefix for one test file or harness: `vwtest-<run>-<label><random>`, where
 * `<run>` is the id of this jest run (VW_TEST_RUN, set by the root `test/global-setup.js`). Every
 * key a run writes shares `vwtest-<run>-`, so the global teardown deletes whatever a test left
 * behind (and says so) without touching the keys of another run going on at the same time.
 * Outside jest (a benchmark), `<run>` is `norun`.
 */
export function testKeyPrefix(label = ""): string {
  const run = process.env["VW_TEST_RUN"] ?? "norun";
  return `vwtest-${run}-${label}${randomBytes(4).toString("hex")}`;
}

/** The commands {@link deleteKeysUnder} needs of one Redis node (an ioredis `Redis`). */
export interface KeyScanningNode {
  scan(cursor: string, match: "MATCH", pattern: string, count: "COUNT", n: number): Promise<[string, string[]]>;
  unlink(...keys: string[]): Promise<number>;
}

/** An ioredis `Cluster`: its primaries, each scanned on its own. */
export interface KeyScanningCluster {
  nodes(role: "master"): KeyScanningNode[];
}

/**
 * Deletes every key under `prefix` (a test's or a benchmark's own keys, at its end), on one Redis
 * or on every primary of a Cluster: SCAN runs per node there, and each key is unlinked by itself,
 * since keys of one node may still lie in different slots. Resolves with how many were deleted.
 */
export async function deleteKeysUnder(client: KeyScanningNode | KeyScanningCluster, prefix: string): Promise<number> {
  const nodes = "nodes" in client && typeof client.nodes === "function" ? client.nodes("master") : [client as KeyScanningNode];
  let deleted = 0;
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      const counts = await Promise.all(keys.map((key) => node.unlink(key)));
      deleted += counts.reduce((sum, n) => sum + n, 0);
    } while (cursor !== "0");
  }
  return deleted;
}
