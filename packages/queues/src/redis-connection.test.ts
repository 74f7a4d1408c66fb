/**
 * The options each topology and role gets (the failover behaviour itself is proven against private
 * Sentinel and Cluster stores in failover.int.test.ts). A standalone client points at a closed
 * port and is dropped at once; behind Sentinel and on a Cluster the options are read without a
 * client (one dropped while it looks for its nodes keeps ioredis timers alive for seconds).
 */
import { afterEach, describe, expect, it } from "@jest/globals";
import { Redis } from "ioredis";
import type { RedisTopology } from "@vw/service-kit";
import { createRedisConnection, redisConnectionOptions, type RedisClient } from "./redis-connection.js";
import type { ClusterOptions, RedisOptions } from "ioredis";

const nowhere = [{ host: "127.0.0.1", port: 1 }];
const opened: RedisClient[] = [];
function open(target: string | RedisTopology, role: "worker" | "producer"): RedisClient {
  const client = createRedisConnection(target, role);
  client.on("error", () => undefined);
  opened.push(client);
  return client;
}
afterEach(() => {
  for (const c of opened.splice(0)) c.disconnect();
});

describe("createRedisConnection on a standalone Redis (REDIS_URL)", () => {
  it("builds the client it always did: a worker retries forever, a producer fails fast, the database number is honoured", () => {
    const worker = open("redis://127.0.0.1:1/3", "worker") as Redis;
    expect(worker).toBeInstanceOf(Redis);
    expect(worker.options).toMatchObject({ maxRetriesPerRequest: null, enableReadyCheck: true, enableOfflineQueue: true, db: 3 });
    expect(worker.options.failoverDetector).toBe(false);
    const producer = open({ kind: "standalone", url: "redis://127.0.0.1:1", password: null, tls: false }, "producer") as Redis;
    expect(producer.options).toMatchObject({ maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 5000 });
    expect(producer.options.password).toBeNull();
    expect(producer.options.tls).toBeUndefined();
  });

  it("adds REDIS_PASSWORD and REDIS_TLS when they are set", () => {
    const redis = open({ kind: "standalone", url: "redis://127.0.0.1:1", password: "pw", tls: true }, "producer") as Redis;
    expect(redis.options).toMatchObject({ password: "pw", tls: {} });
  });
});

describe("createRedisConnection behind Sentinel", () => {
  const topology: RedisTopology = { kind: "sentinel", sentinels: nowhere, masterName: "vw", password: "pw", sentinelPassword: "spw", tls: false };
  const optionsOf = (t: RedisTopology, role: "worker" | "producer"): RedisOptions => {
    const plan = redisConnectionOptions(t, role);
    if (plan.kind !== "redis" || plan.url !== null) throw new Error(`expected a Redis through Sentinel, got ${JSON.stringify(plan)}`);
    return plan.options;
  };

  it("gives a worker a connection that follows failovers and never stops reconnecting", () => {
    const options = optionsOf(topology, "worker");
    expect(options).toMatchObject({ sentinels: nowhere, name: "vw", password: "pw", sentinelPassword: "spw", failoverDetector: true, enableReadyCheck: true, maxRetriesPerRequest: null });
    for (const attempt of [1, 10, 1000]) {
      expect(options.retryStrategy!(attempt)).toBeLessThanOrEqual(2000);
      expect(options.sentinelRetryStrategy!(attempt)).toBeLessThanOrEqual(2000);
    }
    const reconnect = options.reconnectOnError!;
    expect(reconnect(new Error("READONLY You can't write against a read only replica."))).toBe(2);
    expect(reconnect(new Error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"))).toBe(2);
    expect(reconnect(new Error("ERR unknown command"))).toBe(false);
  });

  it("gives a producer the same failover handling, failing its commands fast", () => {
    const options = optionsOf(topology, "producer");
    expect(options).toMatchObject({ maxRetriesPerRequest: 1, enableOfflineQueue: false, failoverDetector: true });
    expect(options.reconnectOnError!(new Error("READONLY You can't write against a read only replica."))).toBe(1);
  });

  it("uses TLS to the data nodes and to the sentinels with REDIS_TLS", () => {
    expect(optionsOf({ ...topology, tls: true }, "producer")).toMatchObject({ tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} });
  });
});

describe("createRedisConnection on a Cluster", () => {
  const topology: RedisTopology = { kind: "cluster", nodes: nowhere, password: "pw", tls: false };
  const optionsOf = (t: RedisTopology, role: "worker" | "producer"): ClusterOptions => {
    const plan = redisConnectionOptions(t, role);
    if (plan.kind !== "cluster") throw new Error(`expected a Cluster, got ${JSON.stringify(plan)}`);
    expect(plan.nodes).toEqual(nowhere);
    return plan.options;
  };

  it("gives a worker a Cluster that reads from primaries and never stops looking for the cluster", () => {
    const options = optionsOf(topology, "worker");
    expect(options).toMatchObject({ scaleReads: "master", enableReadyCheck: true, enableOfflineQueue: true, slotsRefreshTimeout: 2000 });
    expect(options.redisOptions).toMatchObject({ password: "pw", maxRetriesPerRequest: null });
    expect(options.clusterRetryStrategy!(1000)).toBeLessThanOrEqual(2000);
    expect(options.natMap).toBeUndefined();
  });

  it("gives a producer a Cluster that fails fast", () => {
    const options = optionsOf(topology, "producer");
    expect(options).toMatchObject({ scaleReads: "master", enableOfflineQueue: false });
    expect(options.redisOptions).toMatchObject({ maxRetriesPerRequest: 1, connectTimeout: 5000 });
  });

  it("connects to TLS nodes by the names they announce", () => {
    const options = optionsOf({ ...topology, tls: true }, "producer");
    expect(options.redisOptions).toMatchObject({ tls: {} });
    const resolved: string[] = [];
    options.dnsLookup!("redis-0.cache.example.com", (_err, address) => resolved.push(address));
    expect(resolved).toEqual(["redis-0.cache.example.com"]);
  });
});
