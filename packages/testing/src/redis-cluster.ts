/**
 * A private Redis Cluster from the machine's `redis-server`: N primaries with R replicas each, one
 * process per node on free loopback ports (the cluster bus on its own free port, not port+10000),
 * created with `redis-cli --cluster create`. Tests SIGKILL a primary and wait for its replica's
 * promotion, as a managed cluster fails over.
 */
import { eventually } from "./eventually.js";
import { run } from "./owned-processes.js";
import { freePort } from "./processes.js";
import { startRedis, type PrivateRedis } from "./redis-server.js";
import { infoFields, redisCommand } from "./resp-command.js";

/** A node's address. */
export interface RedisNodeAddress {
  host: string;
  port: number;
}

/** Options of {@link startRedisCluster}. */
export interface StartRedisClusterOptions {
  /** Primaries (default 3, the least Redis accepts). */
  primaries?: number;
  /** Replicas of each primary (default 1). */
  replicasPerPrimary?: number;
  /** `cluster-node-timeout` (default 2000 ms): a primary is failed over a few seconds after it. */
  nodeTimeoutMs?: number;
  /** How long to wait for the cluster to be up (default 60 s). */
  readyTimeoutMs?: number;
}

/** A running private Redis Cluster (see {@link startRedisCluster}). */
export interface PrivateRedisCluster {
  /** Every node, as started (seed nodes for a client). */
  readonly nodes: readonly RedisNodeAddress[];
  /** The nodes as `host:port,host:port,...`, for REDIS_CLUSTER_NODES. */
  readonly seeds: string;
  /** The nodes serving slots now, as the live nodes see them. */
  primaries(): Promise<RedisNodeAddress[]>;
  /** The primary serving `key`'s slot now (`{tag}` keys: the tag's), to kill the one a queue lives on. */
  primaryForKey(key: string): Promise<RedisNodeAddress>;
  /** SIGKILLs (or sends `signal` to) the node on `node.port`; resolves once it has exited. */
  kill(node: RedisNodeAddress, signal?: NodeJS.Signals): Promise<void>;
  /**
   * Resolves with the replica promoted in place of `killed` (a primary stopped with
   * {@link kill}), once every live node sees it as a primary and says `cluster_state:ok`.
   */
  waitForPromotion(killed: RedisNodeAddress, options?: { timeoutMs?: number }): Promise<RedisNodeAddress>;
  /** Kills every node and removes their directories. Safe to call twice. */
  stop(): Promise<void>;
}

/** One line of `CLUSTER NODES`. */
interface ClusterNode {
  id: string;
  port: number;
  flags: string[];
  masterId: string;
  slots: string[];
}

function parseClusterNodes(text: unknown): ClusterNode[] {
  if (typeof text !== "string") return [];
  return text
    .trim()
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => {
      const [id = "", address = "", flags = "", masterId = "", , , , , ...slots] = line.split(" ");
      const port = Number(/:(\d+)/.exec(address)?.[1] ?? NaN);
      return { id, port, flags: flags.split(","), masterId, slots };
    });
}

/** Whether a `CLUSTER NODES` slot field (`5461-10922`, `42`; `[...]` migrations never match) holds `slot`. */
function inRange(range: string, slot: number): boolean {
  const m = /^(\d+)(?:-(\d+))?$/.exec(range);
  if (!m) return false;
  const low = Number(m[1]);
  return slot >= low && slot <= Number(m[2] ?? low);
}

const isServingPrimary = (n: ClusterNode): boolean => n.flags.includes("master") && !n.flags.some((f) => f.startsWith("fail")) && n.slots.length > 0;

/**
 * Starts a Redis Cluster of `primaries * (1 + replicasPerPrimary)` nodes (3 and 1 by default) and
 * resolves once every node says `cluster_state:ok`, knows every other node, and every replica's
 * link to its primary is up. A start that fails halfway kills what it started.
 */
export async function startRedisCluster(options: StartRedisClusterOptions = {}): Promise<PrivateRedisCluster> {
  const primaryCount = options.primaries ?? 3;
  const replicasPerPrimary = options.replicasPerPrimary ?? 1;
  const total = primaryCount * (1 + replicasPerPrimary);
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000;
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const servers: PrivateRedis[] = [];
  const stopAll = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    const ports: [number, number][] = [];
    for (let i = 0; i < total; i += 1) ports.push([await freePort(), await freePort()]);
    const started = await Promise.allSettled(
      ports.map(([port, busPort]) =>
        startRedis({
          port,
          args: ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", String(nodeTimeoutMs), "--cluster-port", String(busPort)],
        }),
      ),
    );
    for (const s of started) if (s.status === "fulfilled") servers.push(s.value);
    const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failed) throw failed.reason;
    await run("redis-cli", ["--cluster", "create", ...ports.map(([p]) => `127.0.0.1:${p}`), "--cluster-replicas", String(replicasPerPrimary), "--cluster-yes"], {
      timeoutMs: readyTimeoutMs,
    });
    await eventually(
      `the ${total}-node cluster is ok on every node, each replica linked to its primary`,
      async () => {
        for (const s of servers) {
          const info = infoFields(await redisCommand(s.port, ["CLUSTER", "INFO"]));
          if (info.get("cluster_state") !== "ok" || Number(info.get("cluster_known_nodes")) !== total) return false;
          const replication = infoFields(await redisCommand(s.port, ["INFO", "replication"]));
          if (replication.get("role") === "slave" && replication.get("master_link_status") !== "up") return false;
        }
        return true;
      },
      { timeoutMs: readyTimeoutMs },
    );
  } catch (err) {
    await stopAll();
    throw err;
  }

  const nodes = servers.map((s) => ({ host: "127.0.0.1", port: s.port }));
  const live = (): PrivateRedis[] => servers.filter((s) => s.alive);
  const serverOf = (node: RedisNodeAddress): PrivateRedis => {
    const server = servers.find((s) => s.port === node.port);
    if (!server) throw new Error(`no node of this cluster on port ${node.port}`);
    return server;
  };
  const viewOf = async (server: PrivateRedis): Promise<ClusterNode[]> => parseClusterNodes(await redisCommand(server.port, ["CLUSTER", "NODES"]));
  /** What each killed primary's node id and replicas were, for {@link PrivateRedisCluster.waitForPromotion}. */
  const killedPrimaries = new Map<number, { id: string; replicaIds: string[] }>();

  return {
    nodes,
    seeds: nodes.map((n) => `${n.host}:${n.port}`).join(","),
    primaries: async () => {
      const [first] = live();
      if (!first) return [];
      return (await viewOf(first)).filter(isServingPrimary).map((n) => ({ host: "127.0.0.1", port: n.port }));
    },
    primaryForKey: async (key) => {
      const [first] = live();
      if (!first) throw new Error("no live node in the cluster");
      const slot = Number(await redisCommand(first.port, ["CLUSTER", "KEYSLOT", key]));
      const owner = (await viewOf(first)).filter(isServingPrimary).find((n) => n.slots.some((range) => inRange(range, slot)));
      if (!owner) throw new Error(`no serving primary holds slot ${slot} of ${key}`);
      return { host: "127.0.0.1", port: owner.port };
    },
    kill: async (node, signal = "SIGKILL") => {
      const server = serverOf(node);
      const witness = live().find((s) => s !== server);
      if (witness) {
        const view = await viewOf(witness);
        const self = view.find((n) => n.port === node.port);
        if (self && isServingPrimary(self)) killedPrimaries.set(node.port, { id: self.id, replicaIds: view.filter((n) => n.masterId === self.id).map((n) => n.id) });
      }
      await server.kill(signal);
    },
    waitForPromotion: async (killed, { timeoutMs = 30_000 } = {}) => {
      const before = killedPrimaries.get(killed.port);
      if (!before) throw new Error(`127.0.0.1:${killed.port} was not a serving primary killed with kill()`);
      return eventually(
        `a replica of 127.0.0.1:${killed.port} is promoted and every live node says cluster_state:ok`,
        async () => {
          let promoted: number | undefined;
          for (const server of live()) {
            const info = infoFields(await redisCommand(server.port, ["CLUSTER", "INFO"]));
            if (info.get("cluster_state") !== "ok") return false;
            const view = await viewOf(server);
            const replacement = view.find((n) => before.replicaIds.includes(n.id) && isServingPrimary(n));
            if (!replacement || (promoted !== undefined && promoted !== replacement.port)) return false;
            promoted = replacement.port;
          }
          return promoted === undefined ? false : { host: "127.0.0.1", port: promoted };
        },
        { timeoutMs },
      );
    },
    stop: stopAll,
  };
}
