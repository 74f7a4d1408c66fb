import { describe, expect, it } from "@jest/globals";
import { ConfigError, parseEnv } from "./config.js";
import { DEFAULT_REDIS_URL, describeRedisTopology, readRedisTopology, REDIS_TOPOLOGY_VARIABLES, type RedisTopology } from "./redis-topology.js";

const read = (env: Record<string, string>): RedisTopology => parseEnv(env, (r) => ({ redis: readRedisTopology(r) })).redis;

function problemsOf(env: Record<string, string>): string[] {
  try {
    read(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe("readRedisTopology", () => {
  it("defaults to the local standalone Redis, as before", () => {
    expect(read({})).toEqual({ kind: "standalone", url: DEFAULT_REDIS_URL, password: null, tls: false });
  });

  it("keeps REDIS_URL as given, its database number and password included", () => {
    expect(read({ REDIS_URL: "redis://:pw@cache:6380/3" })).toEqual({ kind: "standalone", url: "redis://:pw@cache:6380/3", password: null, tls: false });
    expect(read({ REDIS_URL: "rediss://cache.example.com:6380/0" })).toMatchObject({ kind: "standalone", tls: true });
    expect(read({ REDIS_URL: "redis://cache:6379", REDIS_PASSWORD: "pw", REDIS_TLS: "true" })).toEqual({ kind: "standalone", url: "redis://cache:6379", password: "pw", tls: true });
  });

  it("reads Sentinel: the sentinels, the master name and both passwords", () => {
    expect(
      read({ REDIS_SENTINELS: "sentinel-0.redis:26379, 10.0.0.12:26380,[fd00::1]:26379", REDIS_SENTINEL_MASTER: "mymaster", REDIS_PASSWORD: "data-pw", REDIS_SENTINEL_PASSWORD: "sentinel-pw", REDIS_TLS: "true" }),
    ).toEqual({
      kind: "sentinel",
      sentinels: [
        { host: "sentinel-0.redis", port: 26379 },
        { host: "10.0.0.12", port: 26380 },
        { host: "fd00::1", port: 26379 },
      ],
      masterName: "mymaster",
      password: "data-pw",
      sentinelPassword: "sentinel-pw",
      tls: true,
    });
  });

  it("reads Cluster seed nodes", () => {
    expect(read({ REDIS_CLUSTER_NODES: "redis-0:6379,redis-1:6379", REDIS_PASSWORD: "pw" })).toEqual({
      kind: "cluster",
      nodes: [
        { host: "redis-0", port: 6379 },
        { host: "redis-1", port: 6379 },
      ],
      password: "pw",
      tls: false,
    });
  });

  it.each([
    [{ REDIS_URL: "redis://a:6379", REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_MASTER: "m" }, "REDIS_URL and REDIS_SENTINELS are both set"],
    [{ REDIS_URL: "redis://a:6379", REDIS_CLUSTER_NODES: "c:6379" }, "REDIS_URL and REDIS_CLUSTER_NODES are both set"],
    [{ REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_MASTER: "m", REDIS_CLUSTER_NODES: "c:6379" }, "REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set"],
    [{ REDIS_URL: "redis://a:6379", REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_MASTER: "m", REDIS_CLUSTER_NODES: "c:6379" }, "REDIS_URL, REDIS_SENTINELS and REDIS_CLUSTER_NODES are all set"],
  ])("refuses two topologies at once, naming both variables: %j", (env, message) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(message);
    expect(problems[0]).toContain("choose one Redis topology");
  });

  it.each([
    [{ REDIS_SENTINELS: "s:26379" }, "REDIS_SENTINEL_MASTER is required with REDIS_SENTINELS (the master name the sentinels monitor)"],
    [{ REDIS_SENTINEL_MASTER: "m" }, "REDIS_SENTINEL_MASTER is set without REDIS_SENTINELS: Sentinel needs the sentinels' addresses"],
    [{ REDIS_SENTINELS: "s:26379,s2", REDIS_SENTINEL_MASTER: "m" }, 'REDIS_SENTINELS must be host:port pairs separated by commas (redis-0.internal:26379,10.0.0.12:26379), got "s2"'],
    [{ REDIS_CLUSTER_NODES: "c:70000" }, 'REDIS_CLUSTER_NODES must be host:port pairs separated by commas (redis-0.internal:26379,10.0.0.12:26379), got "c:70000"'],
    [{ REDIS_CLUSTER_NODES: "c:6379,,d:6379" }, 'REDIS_CLUSTER_NODES must be host:port pairs separated by commas (redis-0.internal:26379,10.0.0.12:26379), got ""'],
    [{ REDIS_CLUSTER_NODES: "redis://c:6379" }, 'REDIS_CLUSTER_NODES must be host:port pairs separated by commas (redis-0.internal:26379,10.0.0.12:26379), got "redis://c:6379"'],
    [{ REDIS_TLS: "maybe" }, 'REDIS_TLS must be true or false, got "maybe"'],
    [{ REDIS_URL: "rediss://c:6380", REDIS_TLS: "false" }, "REDIS_TLS=false contradicts REDIS_URL, whose rediss:// scheme asks for TLS"],
    [{ REDIS_URL: "redis://:one@c:6379", REDIS_PASSWORD: "two" }, "REDIS_PASSWORD is set and REDIS_URL carries a password too: give it once"],
    [{ REDIS_URL: "http://c:6379" }, 'REDIS_URL must use redis: or rediss:, got "http:"'],
  ])("refuses %j", (env, message) => {
    expect(problemsOf(env)).toEqual([message]);
  });

  it("never repeats a password in a problem", () => {
    const problems = problemsOf({ REDIS_CLUSTER_NODES: "user:s3cret@c:6379" });
    expect(problems.join("\n")).not.toContain("s3cret");
  });

  it("reads every one of its variables whatever is set, so a manifest checker knows them all", () => {
    const seen = new Set<string>();
    const env = new Proxy<Record<string, string | undefined>>({}, {
      get(_target, key) {
        if (typeof key === "string") seen.add(key);
        return undefined;
      },
    });
    parseEnv(env, (r) => readRedisTopology(r));
    expect([...seen].sort()).toEqual([...REDIS_TOPOLOGY_VARIABLES].sort());
  });
});

describe("describeRedisTopology", () => {
  it("names the kind and the addresses, never a password", () => {
    expect(describeRedisTopology(read({ REDIS_URL: "redis://:s3cret@cache:6379/2" }))).toBe("standalone redis://***@cache:6379/2");
    expect(describeRedisTopology(read({ REDIS_SENTINELS: "a:1,[::1]:2", REDIS_SENTINEL_MASTER: "m", REDIS_PASSWORD: "s3cret", REDIS_TLS: "1" }))).toBe('sentinel master "m" via a:1,[::1]:2 (TLS)');
    expect(describeRedisTopology(read({ REDIS_CLUSTER_NODES: "c:7000", REDIS_PASSWORD: "s3cret" }))).toBe("cluster seeded by c:7000");
  });
});
