/**
 * Redis connections for every process, on every topology (standalone, Sentinel, Cluster: see
 * `readRedisTopology` in @vw/service-kit), with one policy per role:
 * - workers block on Redis and must survive its restarts and failovers, so their connection
 *   retries commands forever (`maxRetriesPerRequest: null`, BullMQ's requirement) and never stops
 *   reconnecting;
 * - producers answer HTTP requests, so they fail fast: a command that cannot be sent within one
 *   retry rejects, and the request gets a 503 instead of hanging.
 *
 * Failovers (BullMQ's known defect of workers that stop taking jobs after one until they
 * were restarted). The blocking connection BullMQ duplicates from a worker's sits in BZPOPMIN, on
 * the primary. When that primary dies, the socket closes and ioredis reconnects; with Sentinel it
 * asks the sentinels again, which name the old primary until they have promoted a replica, so the
 * retries must never give up (`retryStrategy` and `sentinelRetryStrategy` always return a delay)
 * and stay short (at most 2 s apart) to notice the new primary soon. When the old primary does
 * not close its sockets (frozen, cut off by a partition, or demoted by a manual failover), the
 * connection would stay up on it, unanswered or on a replica: `failoverDetector` subscribes to the
 * sentinels' `+switch-master` and reconnects at once (without it, a frozen primary stops the
 * worker: failover.int.test.ts), the ready check refuses a node whose role is not master, and a
 * READONLY or UNBLOCKED reply (Redis cutting the blocked command at the demotion) makes ioredis
 * reconnect and resend the command to the primary. BullMQ itself (6.x) re-arms a blocking command
 * left hanging by a reconnect (its watchdog) and re-creates an empty Cluster node pool before
 * blocking again; these options make sure the connection under it can always come back.
 *
 * On a Cluster: reads go to primaries only (`scaleReads: "master"`), a replica's data may lag and
 * BullMQ reads what it just wrote; slot refreshes after a failover get 2 s; a command that meets a
 * dead node is retried on the refreshed slot map (`retryDelayOnFailover`) for about 3 s on a
 * worker. Every key one Lua script touches must share a hash tag (the key layout's business, not
 * the connection's). `natMap` is not set: the nodes announce addresses the services can reach.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { RedisNodeAddress, RedisTopology, SentinelRedisTopology, StandaloneRedisTopology } from "@vw/service-kit";

/** Which side of a queue the connection serves. */
export type RedisRole = "worker" | "producer";

/** A Redis client of any topology: one standalone or Sentinel-managed Redis, or a Cluster. */
export type RedisClient = Redis | Cluster;

/** Longest pause between two reconnection attempts of a Sentinel or Cluster connection. */
const MAX_RECONNECT_DELAY_MS = 2000;

/** Grows by 200 ms per attempt up to {@link MAX_RECONNECT_DELAY_MS}, and never gives up (no null). */
const reconnectDelay = (attempt: number): number => Math.min(attempt * 200, MAX_RECONNECT_DELAY_MS);

/**
 * A Redis connection with the retry policy of its role, for the given topology (a string is a
 * standalone REDIS_URL). A worker's connection also coalesces its socket writes per tick
 * (`coalesceWritesPerTick`), on each node of a Cluster: a drain's BullMQ calls and those of the
 * other drains of the moment are written together instead of one system call each.
 */
export function createRedisConnection(target: string | StandaloneRedisTopology | SentinelRedisTopology, role: RedisRole): Redis;
export function createRedisConnection(target: string | RedisTopology, role: RedisRole): RedisClient;
export function createRedisConnection(target: string | RedisTopology, role: RedisRole): RedisClient {
  const plan = redisConnectionOptions(target, role);
  if (plan.kind === "cluster") {
    const cluster = new Cluster(plan.nodes, plan.options);
    if (role === "worker") cluster.on("+node", (node: Redis) => coalesceWritesPerTick(node));
    return cluster;
  }
  const redis = plan.url === null ? new Redis(plan.options) : new Redis(plan.url, plan.options);
  if (role === "worker") coalesceWritesPerTick(redis);
  if (plan.options.failoverDetector === true) tendFailoverDetector(redis);
  return redis;
}

/** What {@link createRedisConnection} builds: one Redis (by URL, or through Sentinel) or a Cluster, and its options. */
export type RedisConnectionOptions =
  | { kind: "redis"; /** REDIS_URL; null behind Sentinel (the options name the sentinels). */ url: string | null; options: RedisOptions }
  | { kind: "cluster"; nodes: { host: string; port: number }[]; options: ClusterOptions };

/**
 * The ioredis options {@link createRedisConnection} uses for a topology and a role, without
 * connecting: for a client of one's own (a benchmark's statistics connection, say) that must
 * reach the same Redis the same way.
 */
export function redisConnectionOptions(target: string | RedisTopology, role: RedisRole): RedisConnectionOptions {
  const topology: RedisTopology = typeof target === "string" ? { kind: "standalone", url: target, password: null, tls: false } : target;
  switch (topology.kind) {
    case "cluster":
      return { kind: "cluster", nodes: seeds(topology.nodes), options: clusterOptions(topology, role) };
    case "sentinel":
      return { kind: "redis", url: null, options: { ...roleOptions(role, "sentinel"), ...sentinelOptions(topology, role) } };
    case "standalone":
      return { kind: "redis", url: topology.url, options: { ...roleOptions(role, "standalone"), ...standaloneOptions(topology) } };
  }
}

/**
 * What a role changes on a connection to one Redis. A standalone Redis keeps ioredis's own
 * reconnection delays (up to 5 s); behind Sentinel they stay under 2 s, so a connection finds the
 * promoted replica soon after the sentinels name it.
 */
function roleOptions(role: RedisRole, kind: "standalone" | "sentinel"): RedisOptions {
  const options: RedisOptions = role === "producer" ? { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 5000 } : { maxRetriesPerRequest: null, enableReadyCheck: true };
  return kind === "sentinel" ? { ...options, retryStrategy: reconnectDelay } : options;
}

/** REDIS_PASSWORD and REDIS_TLS on top of REDIS_URL, only when set (a `rediss://` URL brings its own TLS). */
function standaloneOptions(topology: StandaloneRedisTopology): RedisOptions {
  return {
    ...(topology.password === null ? {} : { password: topology.password }),
    ...(topology.tls && !topology.url.startsWith("rediss:") ? { tls: {} } : {}),
  };
}

function sentinelOptions(topology: SentinelRedisTopology, role: RedisRole): RedisOptions {
  return {
    sentinels: seeds(topology.sentinels),
    name: topology.masterName,
    ...(topology.password === null ? {} : { password: topology.password }),
    ...(topology.sentinelPassword === null ? {} : { sentinelPassword: topology.sentinelPassword }),
    // REDIS_TLS: TLS to the data nodes and to the sentinels alike.
    ...(topology.tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    sentinelRetryStrategy: reconnectDelay,
    failoverDetector: true,
    // The detector's own connections to the sentinels: back within 2 s of a sentinel's restart (ioredis waits a minute).
    sentinelReconnectStrategy: reconnectDelay,
    enableReadyCheck: true,
    // A producer's command fails fast anyway; a worker's is resent to the primary once found.
    reconnectOnError: (err) => (/^(READONLY|UNBLOCKED)\b/.test(err.message) ? (role === "worker" ? 2 : 1) : false),
  };
}

function clusterOptions(topology: { password: string | null; tls: boolean }, role: RedisRole): ClusterOptions {
  const worker = role === "worker";
  return {
    redisOptions: {
      ...(topology.password === null ? {} : { password: topology.password }),
      ...(topology.tls ? { tls: {} } : {}),
      maxRetriesPerRequest: worker ? null : 1,
      connectTimeout: worker ? 10_000 : 5000,
    },
    scaleReads: "master",
    enableReadyCheck: true,
    // Producers: a request while the cluster is unreachable gets its 503 at once.
    enableOfflineQueue: worker,
    clusterRetryStrategy: reconnectDelay,
    slotsRefreshTimeout: 2000,
    retryDelayOnFailover: worker ? 200 : 100,
    retryDelayOnClusterDown: worker ? 300 : 100,
    // Managed clusters with TLS announce host names their certificates carry: connect by name.
    ...(topology.tls ? { dnsLookup: (address: string, callback: (err: Error | null, address: string) => void) => callback(null, address) } : {}),
  };
}

/**
 * Two things ioredis's failover detector (`failoverDetector`: a connection of its own to each
 * sentinel, subscribed to `+switch-master`) needs from us:
 * - it puts no `error` listener on its connections, so a sentinel that goes away (a rolling
 *   restart, a lost node) makes ioredis print "[ioredis] Unhandled error event" and a stack trace
 *   to stderr at every reconnection attempt: plain text outside the JSON log. Those errors are
 *   dropped here: a missing sentinel is not a missing Redis (the others still answer, and the data
 *   connection reports its own errors). The detector is rebuilt at each connection, after which
 *   ioredis emits `connect`;
 * - QUIT ends the data connection but not the detector's (only `disconnect()` reaches them), and
 *   they reconnect forever: a process that closed everything, BullMQ's blocking connections
 *   included (BullMQ closes them with QUIT), stayed alive. The detector is closed here when the
 *   connection ends (`end`: closed for good, whichever way).
 * The copies BullMQ makes for blocking reads (`duplicate()`) get the same treatment.
 */
function tendFailoverDetector(redis: Redis): void {
  const detector = () => (redis as unknown as { connector?: { failoverDetector?: { sentinels?: { client: Redis }[]; cleanup(): void } | null } }).connector?.failoverDetector;
  redis.on("connect", () => {
    for (const { client } of detector()?.sentinels ?? []) {
      if (client.listenerCount("error") === 0) client.on("error", () => undefined);
    }
  });
  redis.on("end", () => detector()?.cleanup());
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (override?: Partial<RedisOptions>): Redis => {
    const copy = duplicate(override);
    tendFailoverDetector(copy);
    return copy;
  };
}

const seeds = (nodes: readonly RedisNodeAddress[]): { host: string; port: number }[] => nodes.map(({ host, port }) => ({ host, port }));

/**
 * Makes every socket this connection opens (the first and each one after a reconnect) gather the
 * commands written within one tick of the event loop (the synchronous code and the promise
 * continuations it starts) into one write: the socket is corked at the tick's first write and
 * uncorked on `process.nextTick`. The bytes and their order are exactly what ioredis wrote, so
 * replies still match commands one by one; only the number of system calls changes. Alternated
 * runs of `pnpm bench delivery` with and without it measured a small saving of CPU per delivery
 * (docs/decisions/0009-worker-redis-writes-coalesced-per-tick.md). This is not ioredis's
 * `enableAutoPipelining`, which rebuilds commands into pipelines and with which Bull's users saw
 * job data lost; corking is below ioredis and cannot change what is sent. A connection BullMQ
 * duplicates for blocking reads is a new connection and sends one command at a time; it is left
 * alone.
 */
function coalesceWritesPerTick(redis: Redis): void {
  redis.on("connect", () => {
    const socket = redis.stream;
    const write = socket.write;
    let corked = false;
    const uncork = (): void => {
      corked = false;
      socket.uncork();
    };
    socket.write = function (this: typeof socket, ...args: Parameters<typeof write>) {
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(uncork);
      }
      return write.apply(this, args);
    } as typeof write;
  });
}

/** How long {@link closeRedisConnection} waits for the answer to QUIT. */
const QUIT_WAIT_MS = 2000;

/**
 * Closes a connection at shutdown, the same way in every process and on every topology: QUIT when
 * it is ready (the replies still due are read first), at most `quitWaitMs`; a disconnect when it is
 * not (reconnecting during an outage: there is nothing to wait for, and a QUIT would only be
 * queued or refused) or when QUIT got no answer in time. Never rejects: a connection that cannot
 * say goodbye is closed all the same.
 */
export async function closeRedisConnection(client: RedisClient, quitWaitMs: number = QUIT_WAIT_MS): Promise<void> {
  if (client.status === "end") return;
  if (client.status === "ready") {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), quitWaitMs)));
    const quit = await Promise.race([client.quit().then(() => "quit" as const, () => "failed" as const), waited]);
    clearTimeout(timer);
    if (quit === "quit") return;
  }
  client.disconnect();
}
