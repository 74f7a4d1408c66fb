/**
 * Helpers for a test's or a benchmark's own ioredis client on any topology (a Redis, or a Cluster
 * of several primaries), typed by what they use so this package needs no ioredis of its own.
 */

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
 * since keys of one node may still lie in different slots. A Cluster client must be ready (see
 * {@link redisReady}): before that it knows no primaries. Resolves with how many were deleted.
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

/** What {@link redisReady} needs of a client (an ioredis `Redis` or `Cluster`). */
export interface ReadyingClient {
  readonly status: string;
  once(event: "ready", listener: () => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  off(event: "error", listener: (err: Error) => void): unknown;
}

/**
 * Resolves once `client` is ready (a Cluster: once it knows its slots and primaries); rejects
 * after `timeoutMs` with the last error it reported. A connection that refuses commands until it
 * is ready (a producer's) can be used right after.
 */
export async function redisReady(client: ReadyingClient, timeoutMs = 10_000): Promise<void> {
  if (client.status === "ready") return;
  let lastError: Error | undefined;
  const onError = (err: Error): void => {
    lastError = err;
  };
  client.on("error", onError);
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis not ready within ${timeoutMs} ms: ${lastError?.message ?? "no error reported"}`)), timeoutMs);
      client.once("ready", resolve);
    });
  } finally {
    clearTimeout(timer);
    client.off("error", onError);
  }
}
