import { describe, expect, it } from "@jest/globals";
import { startRedisCluster } from "./redis-cluster.js";
import { startSentinelGroup } from "./redis-sentinel.js";
import { infoFields, redisCommand } from "./resp-command.js";
import { ownRedisChildren } from "./store-test-kit.js";

describe("startRedisCluster", () => {
  it("starts 3 primaries with a replica each, promotes a killed primary's replica, and stops every node", async () => {
    const cluster = await startRedisCluster({ primaries: 3, replicasPerPrimary: 1 });
    try {
      expect(cluster.nodes).toHaveLength(6);
      expect(cluster.seeds).toBe(cluster.nodes.map((n) => `127.0.0.1:${n.port}`).join(","));
      expect(cluster.nodes.map((n) => n.port)).not.toContain(6379);
      expect(ownRedisChildren()).toHaveLength(6);
      const primaries = await cluster.primaries();
      expect(primaries).toHaveLength(3);
      // primaryForKey names the node that owns a key's slot: it takes the write, the others redirect.
      const owner = await cluster.primaryForKey("{t}:k");
      expect(await redisCommand(owner.port, ["SET", "{t}:k", "v"])).toBe("OK");
      const other = primaries.find((p) => p.port !== owner.port)!;
      await expect(redisCommand(other.port, ["SET", "{t}:k", "v"])).rejects.toThrow(/^MOVED \d+ 127\.0\.0\.1:\d+$/);
      const [victim] = primaries;
      await cluster.kill(victim!);
      const promoted = await cluster.waitForPromotion(victim!);
      expect(promoted.port).not.toBe(victim!.port);
      expect(primaries.map((p) => p.port)).not.toContain(promoted.port);
      const after = await cluster.primaries();
      expect(after.map((p) => p.port).sort()).toEqual([...primaries.filter((p) => p !== victim).map((p) => p.port), promoted.port].sort());
      expect(infoFields(await redisCommand(promoted.port, ["CLUSTER", "INFO"])).get("cluster_state")).toBe("ok");
    } finally {
      await cluster.stop();
    }
    expect(ownRedisChildren()).toEqual([]);
  }, 90_000);

  it("a start that fails halfway leaves no node running", async () => {
    await expect(startRedisCluster({ readyTimeoutMs: 1 })).rejects.toThrow();
    expect(ownRedisChildren()).toEqual([]);
  }, 60_000);
});

describe("startSentinelGroup", () => {
  it("starts a primary, a replica and three sentinels, fails over when the primary is killed, and stops every process", async () => {
    const group = await startSentinelGroup();
    try {
      expect(group.sentinels.split(",")).toHaveLength(3);
      expect(group.masterName).toBe("vwmaster");
      expect(ownRedisChildren()).toHaveLength(5);
      const [first, replica] = group.dataNodes;
      expect(await group.primary()).toEqual(first);
      const killed = await group.killPrimary();
      expect(killed).toEqual(first);
      const promoted = await group.waitForFailover(killed);
      expect(promoted).toEqual(replica);
      expect(await group.primary()).toEqual(replica);
      expect(infoFields(await redisCommand(replica!.port, ["INFO", "replication"])).get("role")).toBe("master");
    } finally {
      await group.stop();
    }
    expect(ownRedisChildren()).toEqual([]);
  }, 90_000);

  it("a start that fails halfway leaves no process running", async () => {
    await expect(startSentinelGroup({ readyTimeoutMs: 1 })).rejects.toThrow(/never happened within/);
    expect(ownRedisChildren()).toEqual([]);
  }, 60_000);
});
