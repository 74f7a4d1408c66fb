/**
 * A private Sentinel group from the machine's `redis-server`: a primary, a replica
 * (`--replicaof`), and three `redis-server <conf> --sentinel` that monitor the primary with a
 * quorum of 2 and `down-after-milliseconds` 1500, each on a free loopback port. Tests SIGKILL the
 * primary and wait for the sentinels to promote the replica, as a managed Redis fails over.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "./eventually.js";
import { removeDir, trackDir } from "./owned-processes.js";
import { freePort } from "./processes.js";
import type { RedisNodeAddress } from "./redis-cluster.js";
import { startRedis, type PrivateRedis } from "./redis-server.js";
import { infoFields, redisCommand } from "./resp-command.js";

/** Options of {@link startSentinelGroup}. */
export interface StartSentinelGroupOptions {
  /** The monitored master's name (`REDIS_SENTINEL_MASTER`); `vwmaster` by default. */
  masterName?: string;
  /** `sentinel down-after-milliseconds` (default 1500). */
  downAfterMs?: number;
  /** How long to wait for the group to be up (default 30 s). */
  readyTimeoutMs?: number;
}

/** A running private Sentinel group (see {@link startSentinelGroup}). */
export interface PrivateSentinelGroup {
  /** The sentinels as `host:port,host:port,...`, for REDIS_SENTINELS. */
  readonly sentinels: string;
  readonly sentinelNodes: readonly RedisNodeAddress[];
  /** The monitored master's name, for REDIS_SENTINEL_MASTER. */
  readonly masterName: string;
  /** The data nodes (first the initial primary, then the replica). */
  readonly dataNodes: readonly RedisNodeAddress[];
  /** The primary as the first live sentinel names it. */
  primary(): Promise<RedisNodeAddress>;
  /** SIGKILLs the current primary and resolves with its address once it has exited. */
  killPrimary(): Promise<RedisNodeAddress>;
  /**
   * SIGSTOPs the current primary: its connections stay open and unanswered, as in a network
   * partition. `stop()` ends it like the others.
   */
  freezePrimary(): Promise<RedisNodeAddress>;
  /** SIGKILLs the `index`th sentinel (0-2): a sentinel restarting or lost, the data nodes untouched. */
  killSentinel(index: number): Promise<void>;
  /**
   * Resolves with the new primary once every live sentinel names a node other than `from` and
   * that node says it is a master.
   */
  waitForFailover(from: RedisNodeAddress, options?: { timeoutMs?: number }): Promise<RedisNodeAddress>;
  /** Kills every process of the group and removes their directories. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts a primary, its replica and three sentinels, and resolves once every sentinel names the
 * primary, knows the replica and the two other sentinels (a failover needs them to agree), and the
 * replica's link is up. A start that fails halfway kills what it started.
 */
export async function startSentinelGroup(options: StartSentinelGroupOptions = {}): Promise<PrivateSentinelGroup> {
  const masterName = options.masterName ?? "vwmaster";
  const downAfterMs = options.downAfterMs ?? 1500;
  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  const data: PrivateRedis[] = [];
  const sentinels: PrivateRedis[] = [];
  const dirs: string[] = [];
  const stopAll = async (): Promise<void> => {
    await Promise.all([...data, ...sentinels].map((s) => s.stop()));
    for (const dir of dirs) await removeDir(dir);
  };
  try {
    const primary = await startRedis();
    data.push(primary);
    data.push(await startRedis({ args: ["--replicaof", "127.0.0.1", String(primary.port)] }));
    const started = await Promise.allSettled(
      [0, 1, 2].map(async () => {
        const port = await freePort();
        const dir = mkdtempSync(join(tmpdir(), "vw-sentinel-"));
        trackDir(dir);
        dirs.push(dir);
        const configFile = join(dir, "sentinel.conf");
        writeFileSync(
          configFile,
          [
            `port ${port}`,
            "bind 127.0.0.1",
            `sentinel monitor ${masterName} 127.0.0.1 ${primary.port} 2`,
            `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
            // A failed attempt is retried after twice this: keep it short enough for a test.
            `sentinel failover-timeout ${masterName} 10000`,
            "",
          ].join("\n"),
        );
        return startRedis({ port, dir, configFile, args: ["--sentinel"] });
      }),
    );
    for (const s of started) if (s.status === "fulfilled") sentinels.push(s.value);
    const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failed) throw failed.reason;
    await eventually(
      `the sentinel group of ${masterName} is ready: every sentinel names the primary and knows the replica and two other sentinels`,
      async () => {
        for (const s of sentinels) {
          const master = await redisCommand(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName]);
          if (!Array.isArray(master) || Number(master[1]) !== primary.port) return false;
          const replicas = await redisCommand(s.port, ["SENTINEL", "REPLICAS", masterName]);
          const others = await redisCommand(s.port, ["SENTINEL", "SENTINELS", masterName]);
          if (!Array.isArray(replicas) || replicas.length !== 1 || !Array.isArray(others) || others.length !== 2) return false;
        }
        const replication = infoFields(await redisCommand(data[1]!.port, ["INFO", "replication"]));
        return replication.get("master_link_status") === "up";
      },
      { timeoutMs: readyTimeoutMs },
    );
  } catch (err) {
    await stopAll();
    throw err;
  }

  const addressOf = (s: PrivateRedis): RedisNodeAddress => ({ host: "127.0.0.1", port: s.port });
  const primaryPort = async (): Promise<number> => {
    for (const s of sentinels.filter((x) => x.alive)) {
      const master = await redisCommand(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName]).catch(() => null);
      if (Array.isArray(master)) return Number(master[1]);
    }
    throw new Error(`no live sentinel names a primary for ${masterName}`);
  };
  const currentPrimary = async (): Promise<PrivateRedis> => {
    const port = await primaryPort();
    const server = data.find((s) => s.port === port);
    if (!server) throw new Error(`the sentinels name 127.0.0.1:${port}, which is not a node of this group`);
    return server;
  };
  return {
    sentinels: sentinels.map((s) => `127.0.0.1:${s.port}`).join(","),
    sentinelNodes: sentinels.map(addressOf),
    masterName,
    dataNodes: data.map(addressOf),
    primary: async () => ({ host: "127.0.0.1", port: await primaryPort() }),
    killPrimary: async () => {
      const server = await currentPrimary();
      await server.kill("SIGKILL");
      return addressOf(server);
    },
    freezePrimary: async () => {
      const server = await currentPrimary();
      await server.kill("SIGSTOP");
      return addressOf(server);
    },
    killSentinel: async (index) => {
      const sentinel = sentinels[index];
      if (!sentinel) throw new Error(`no sentinel ${index}: the group has ${sentinels.length}`);
      await sentinel.kill("SIGKILL");
    },
    waitForFailover: async (from, { timeoutMs = 30_000 } = {}) =>
      eventually(
        `the sentinels promote a replica of 127.0.0.1:${from.port} (${masterName})`,
        async () => {
          let named: number | undefined;
          for (const s of sentinels.filter((x) => x.alive)) {
            const master = await redisCommand(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName]);
            const port = Array.isArray(master) ? Number(master[1]) : NaN;
            if (port === from.port || (named !== undefined && named !== port)) return false;
            named = port;
          }
          if (named === undefined) return false;
          const role = infoFields(await redisCommand(named, ["INFO", "replication"])).get("role");
          return role === "master" ? { host: "127.0.0.1", port: named } : false;
        },
        { timeoutMs },
      ),
    stop: stopAll,
  };
}
