/**
 * The Redis topology of a process, read once from the environment by every service's config:
 * exactly one of
 * - `REDIS_URL=redis://host:port/db` (the default, `redis://127.0.0.1:6379`): a standalone Redis;
 * - `REDIS_SENTINELS=host:port,...` with `REDIS_SENTINEL_MASTER=<name>`: a primary and its
 *   replicas behind Sentinel, which names the primary (and a new one after a failover);
 * - `REDIS_CLUSTER_NODES=host:port,...`: seed nodes of a Redis Cluster.
 * Optional in every mode: `REDIS_PASSWORD`, `REDIS_SENTINEL_PASSWORD` (used with Sentinel only),
 * `REDIS_TLS=true`. Two topologies at once is a configuration error naming both variables: a
 * process that picked one silently could write its queue where the others do not read it.
 *
 * The result is plain data; `createRedisConnection` in @vw/queues turns it into a client.
 */
import { isIP } from "node:net";
import { redactCredentials, type EnvReader } from "./config.js";

/** A Redis node's address (a sentinel, or a seed node of a cluster). */
export interface RedisNodeAddress {
  readonly host: string;
  readonly port: number;
}

/** What every topology may add to its addresses. */
interface RedisCredentials {
  /** REDIS_PASSWORD (with standalone, a password in REDIS_URL is kept in the URL instead); null: none. */
  readonly password: string | null;
  /** REDIS_TLS=true, or a `rediss://` REDIS_URL: every connection to a data node uses TLS. */
  readonly tls: boolean;
}

/** A standalone Redis: REDIS_URL. */
export interface StandaloneRedisTopology extends RedisCredentials {
  readonly kind: "standalone";
  /** REDIS_URL as given (a database number in its path is honoured). */
  readonly url: string;
}

/** A primary with replicas behind Sentinel: REDIS_SENTINELS and REDIS_SENTINEL_MASTER. */
export interface SentinelRedisTopology extends RedisCredentials {
  readonly kind: "sentinel";
  readonly sentinels: readonly RedisNodeAddress[];
  /** The master name the sentinels monitor. */
  readonly masterName: string;
  /** REDIS_SENTINEL_PASSWORD: the sentinels' own password, when they require one. */
  readonly sentinelPassword: string | null;
}

/** A Redis Cluster: REDIS_CLUSTER_NODES (seed nodes; the client learns the rest). */
export interface ClusterRedisTopology extends RedisCredentials {
  readonly kind: "cluster";
  readonly nodes: readonly RedisNodeAddress[];
}

/** One of the three ways to reach Redis. */
export type RedisTopology = StandaloneRedisTopology | SentinelRedisTopology | ClusterRedisTopology;

/** REDIS_URL when no topology is set: the local Redis of development. */
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/** Every variable {@link readRedisTopology} reads (REDIS_KEY_PREFIX is read on its own). */
export const REDIS_TOPOLOGY_VARIABLES = ["REDIS_URL", "REDIS_SENTINELS", "REDIS_SENTINEL_MASTER", "REDIS_CLUSTER_NODES", "REDIS_PASSWORD", "REDIS_SENTINEL_PASSWORD", "REDIS_TLS"] as const;

/** A host name (letters, digits, `-`, dot-separated labels); IP literals are checked by isIP. */
const HOST_NAME_RE = /^(?:[0-9A-Za-z-]{1,63}\.)*[0-9A-Za-z-]{1,63}$/;

/**
 * Reads the Redis topology (see the module comment), recording a problem on `r` for each bad or
 * conflicting variable. Every variable is read whatever is set, so a config reader observed by the
 * manifest tests knows them all.
 */
export function readRedisTopology(r: EnvReader): RedisTopology {
  const url = r.optionalString("REDIS_URL");
  const sentinelsText = r.optionalString("REDIS_SENTINELS");
  const masterName = r.optionalString("REDIS_SENTINEL_MASTER");
  const clusterText = r.optionalString("REDIS_CLUSTER_NODES");
  const password = r.optionalString("REDIS_PASSWORD") ?? null;
  const sentinelPassword = r.optionalString("REDIS_SENTINEL_PASSWORD") ?? null;
  const tlsSetting = r.optionalString("REDIS_TLS") === undefined ? undefined : r.bool("REDIS_TLS", false);
  const tls = tlsSetting === true;

  const chosen = [url !== undefined && "REDIS_URL", sentinelsText !== undefined && "REDIS_SENTINELS", clusterText !== undefined && "REDIS_CLUSTER_NODES"].filter(
    (name): name is string => name !== false,
  );
  const choose = "choose one Redis topology (REDIS_URL for a standalone Redis, REDIS_SENTINELS with REDIS_SENTINEL_MASTER for Sentinel, REDIS_CLUSTER_NODES for a Cluster)";
  if (chosen.length === 2) r.problem(`${chosen[0]} and ${chosen[1]} are both set: ${choose}`);
  if (chosen.length === 3) r.problem(`REDIS_URL, REDIS_SENTINELS and REDIS_CLUSTER_NODES are all set: ${choose}`);
  if (masterName !== undefined && sentinelsText === undefined) r.problem("REDIS_SENTINEL_MASTER is set without REDIS_SENTINELS: Sentinel needs the sentinels' addresses");

  if (sentinelsText !== undefined && chosen.length === 1) {
    if (masterName === undefined) r.problem("REDIS_SENTINEL_MASTER is required with REDIS_SENTINELS (the master name the sentinels monitor)");
    return { kind: "sentinel", sentinels: readAddresses(r, "REDIS_SENTINELS", sentinelsText), masterName: masterName ?? "", sentinelPassword, password, tls };
  }
  if (clusterText !== undefined && chosen.length === 1) {
    return { kind: "cluster", nodes: readAddresses(r, "REDIS_CLUSTER_NODES", clusterText), password, tls };
  }
  const standaloneUrl = r.url("REDIS_URL", DEFAULT_REDIS_URL, ["redis:", "rediss:"]);
  return { kind: "standalone", url: standaloneUrl, password, tls: standaloneTls(r, standaloneUrl, tlsSetting, password) };
}

/** TLS of a standalone Redis: `rediss://` or REDIS_TLS=true; contradictions and double passwords refused. */
function standaloneTls(r: EnvReader, url: string, tlsSetting: boolean | undefined, password: string | null): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return tlsSetting === true; // r.url has said why
  }
  if (parsed.protocol === "rediss:" && tlsSetting === false) r.problem("REDIS_TLS=false contradicts REDIS_URL, whose rediss:// scheme asks for TLS");
  if (password !== null && parsed.password !== "") r.problem("REDIS_PASSWORD is set and REDIS_URL carries a password too: give it once");
  return parsed.protocol === "rediss:" || tlsSetting === true;
}

/** `host:port,host:port,...` (IPv6 literals in brackets), each port 1-65535. */
function readAddresses(r: EnvReader, name: string, text: string): RedisNodeAddress[] {
  const addresses: RedisNodeAddress[] = [];
  for (const item of text.split(",").map((s) => s.trim())) {
    const match = /^\[([0-9A-Fa-f:.]+)\]:(\d{1,5})$/.exec(item) ?? /^([^:[\]]+):(\d{1,5})$/.exec(item);
    const host = match?.[1] ?? "";
    const port = Number(match?.[2] ?? NaN);
    const hostOk = match?.[0].startsWith("[") ? isIP(host) === 6 : isIP(host) !== 0 || HOST_NAME_RE.test(host);
    if (!match || !hostOk || port < 1 || port > 65535) {
      r.problem(`${name} must be host:port pairs separated by commas (redis-0.internal:26379,10.0.0.12:26379), got "${redactCredentials(item)}"`);
      continue;
    }
    addresses.push({ host, port });
  }
  return addresses;
}

/** The topology for a log line: kind and addresses, never a password. */
export function describeRedisTopology(topology: RedisTopology): string {
  const list = (nodes: readonly RedisNodeAddress[]): string => nodes.map((n) => (n.host.includes(":") ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(",");
  const tls = topology.tls ? " (TLS)" : "";
  switch (topology.kind) {
    case "standalone":
      return `standalone ${redactCredentials(topology.url)}${tls}`;
    case "sentinel":
      return `sentinel master "${topology.masterName}" via ${list(topology.sentinels)}${tls}`;
    case "cluster":
      return `cluster seeded by ${list(topology.nodes)}${tls}`;
  }
}
