/**
 * The four services started as deployed, configured for a private Sentinel group or a private
 * Redis Cluster instead of REDIS_URL (packages/testing's stores, never the machine's Redis): each
 * one reads the topology, says so in its start-up log, and answers /readyz. On Sentinel an event
 * POSTed to event-ingest reaches its receiver through the delivery worker. On a Cluster, BullMQ's
 * scripts over the queues' keys (admin-api's /readyz counts a queue's jobs; the worker runs them
 * all) need those keys to share a hash tag, which is the queue key layout's business: here,
 * map-storage and event-ingest, whose readiness pings Redis, and event-ingest's throttle of wrong
 * tokens, whose counters are single keys. On each topology, a primary is then SIGKILLed under
 * load (on the Cluster, the one holding the endpoint's delivery shard).
 */
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { EVENT_SAMPLES } from "@vw/contracts";
import { DEFAULT_QUEUE_SHARDS, shardOf, shardTag } from "@vw/queues";
import { eventually, redisCommand, spawnService, startRedisCluster, startSentinelGroup, startWebhookReceiver, type RedisNodeAddress, type ServiceProcess, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const INGEST_TOKEN = "topology-ingest-token-7d2a9f4c1e8b3065";
const ADMIN_TOKEN = "topology-admin-token-3b8e1c6f9a2d4057";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
}, 60_000);
afterAll(async () => {
  await h?.close();
});

/**
 * Starts the four services on `redisEnv` (REDIS_URL blanked: the test run's own would otherwise
 * be a second topology) and resolves once each answers /readyz.
 */
async function startServices(redisEnv: Record<string, string>, which: readonly string[]): Promise<Map<string, ServiceProcess>> {
  const env = (extra: Record<string, string> = {}) => h.processEnv({ ...redisEnv, REDIS_URL: "", LOG_LEVEL: "info", ...extra });
  const envs: Record<string, Record<string, string>> = {
    "event-ingest": env({ INGEST_TOKEN, PLAY_URL: "https://play.example.test" }),
    "delivery-worker": env(),
    "admin-api": env({ ADMIN_TOKEN }),
    "map-storage": env({ REDIS_KEY_PREFIX: `${h.processEnv().REDIS_KEY_PREFIX}:ms:` }),
  };
  const started = await Promise.allSettled(which.map((name) => spawnService(join(servicesDir, name), envs[name]!)));
  const services = new Map<string, ServiceProcess>();
  started.forEach((s, i) => s.status === "fulfilled" && services.set(which[i]!, s.value));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) {
    await stopServices(services);
    throw failed.reason;
  }
  return services;
}

async function stopServices(services: Map<string, ServiceProcess>): Promise<void> {
  await Promise.all([...services.values()].map((s) => s.stop()));
}

/** The last log lines of each service, for a failure message. */
function recentLogs(services: ReadonlyMap<string, ServiceProcess>): string {
  return [...services].map(([name, service]) => `${name}:\n${service.stdout().trim().split("\n").slice(-15).join("\n")}`).join("\n");
}

/** The `redis` field of a service's start-up log line. */
function loggedTopology(service: ServiceProcess): string | undefined {
  for (const line of service.stdout().split("\n")) {
    if (!line.startsWith("{")) continue;
    const entry = JSON.parse(line) as { redis?: string };
    if (entry.redis !== undefined) return entry.redis;
  }
  return undefined;
}

describe("the services on Sentinel (REDIS_SENTINELS, REDIS_SENTINEL_MASTER)", () => {
  it("all four start on it, and an accepted event reaches its receiver through the worker", async () => {
    const group = await startSentinelGroup();
    const receiver = await startWebhookReceiver({ answer: 200 });
    let services = new Map<string, ServiceProcess>();
    try {
      services = await startServices({ REDIS_SENTINELS: group.sentinels, REDIS_SENTINEL_MASTER: group.masterName }, ["event-ingest", "delivery-worker", "admin-api", "map-storage"]);
      for (const [name, service] of services) expect([name, loggedTopology(service)]).toEqual([name, `sentinel master "${group.masterName}" via ${group.sentinels}`]);

      const world = await h.createWorld();
      const endpoint = await h.createEndpoint(world.id, { url: receiver.url, subscriptions: ["visitor"] });
      receiver.setSecret(endpoint.secret);
      const event = { id: randomUUID(), world: `${world.organizationSlug}/${world.slug}`, type: "visitor.registered", timestamp: "2026-11-22T10:00:00.000Z", data: EVENT_SAMPLES["visitor.registered"] };
      const res = await fetch(`${services.get("event-ingest")!.url}/v1/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ events: [event] }),
      });
      expect(res.status).toBe(202);
      await receiver.waitFor(1);
      expect(receiver.received[0]!.verifyError).toBeNull();
      expect(JSON.parse(receiver.received[0]!.body.toString("utf8"))).toMatchObject({ type: "visitor.registered" });
    } finally {
      await stopServices(services);
      await receiver.close();
      await group.stop();
    }
  }, 120_000);
});

describe("the services on a Cluster (REDIS_CLUSTER_NODES)", () => {
  it("map-storage and event-ingest start on it and answer /readyz; event-ingest throttles wrong tokens with its counters in the Cluster", async () => {
    const cluster = await startRedisCluster();
    let services = new Map<string, ServiceProcess>();
    try {
      services = await startServices({ REDIS_CLUSTER_NODES: cluster.seeds, AUTH_FAILURES_MAX: "2" }, ["event-ingest", "map-storage"]);
      for (const [name, service] of services) {
        expect([name, loggedTopology(service)]).toEqual([name, `cluster seeded by ${cluster.seeds}`]);
        expect([name, (await fetch(`${service.url}/readyz`)).status]).toEqual([name, 200]);
      }
      const post = async (token: string) =>
        (await fetch(`${services.get("event-ingest")!.url}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: '{"events":[]}' })).status;
      expect([await post("wrong-token-1"), await post("wrong-token-2"), await post(INGEST_TOKEN)]).toEqual([401, 401, 429]);
      // The counter is one key on the primary of its slot (a script over keys of two slots would be refused there).
      const key = `${h.processEnv().REDIS_KEY_PREFIX}:auth-failures:ingest-token:127.0.0.1`;
      const owner = await cluster.primaryForKey(key);
      expect(await redisCommand(owner.port, ["HGET", key, "failures"])).toBe("2");
    } finally {
      await stopServices(services);
      await cluster.stop();
    }
  }, 120_000);
});

/** The events the load got accepted so far (202), and when each was. */
interface AcceptedEvents {
  accepted: string[];
  acceptedAt: Map<string, number>;
}

/**
 * Events POSTed to event-ingest in small batches until `stop` resolves, through the failover; the
 * ids of those accepted (202) are added to `into` as they are. Refused requests (the primary gone)
 * are not accepted and owe nothing.
 */
async function postUnderLoad(ingestUrl: string, worldRef: string, stop: Promise<unknown>, into: AcceptedEvents): Promise<void> {
  let stopping = false;
  void stop.then(() => (stopping = true));
  const { accepted, acceptedAt } = into;
  while (!stopping) {
    const events = Array.from({ length: 5 }, () => ({ id: randomUUID(), world: worldRef, type: "visitor.registered", timestamp: "2026-11-22T10:00:00.000Z", data: EVENT_SAMPLES["visitor.registered"] }));
    const res = await fetch(`${ingestUrl}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ events }),
      signal: AbortSignal.timeout(5_000),
    }).catch(() => null);
    if (res?.status === 202) {
      for (const e of events) {
        accepted.push(e.id);
        acceptedAt.set(e.id, Date.now());
      }
    }
    await res?.body?.cancel().catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The failover test of one topology: event-ingest and the worker on it, events flowing to one
 * endpoint; `kill` SIGKILLs the primary holding the endpoint's shard and resolves once a replica is
 * promoted. Passes when every accepted event is delivered, both processes are alive, and an event
 * accepted after the promotion is delivered. Waits are for conditions, with deadlines generous
 * enough for a busy machine; no duration is asserted.
 */
async function failoverUnderLoad(redisEnv: Record<string, string>, kill: (endpointId: string) => Promise<RedisNodeAddress>): Promise<void> {
  const receiver: WebhookReceiver = await startWebhookReceiver({ answer: 200 });
  let promoted: () => void = () => undefined;
  let services = new Map<string, ServiceProcess>();
  try {
    services = await startServices({ ...redisEnv, RECONCILE_INTERVAL_MS: "2000" }, ["event-ingest", "delivery-worker"]);
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: receiver.url, subscriptions: ["visitor"] });
    receiver.setSecret(endpoint.secret);
    const ingestUrl = services.get("event-ingest")!.url;
    const done = new Promise<void>((resolve) => (promoted = resolve));
    const events: AcceptedEvents = { accepted: [], acceptedAt: new Map() };
    const load = postUnderLoad(ingestUrl, `${world.organizationSlug}/${world.slug}`, done, events);
    await eventually("deliveries flow before the failover", () => receiver.received.length >= 10, { timeoutMs: 60_000 });
    await kill(endpoint.id);
    const promotedAt = Date.now();
    // Keep posting after the promotion: those events must flow too.
    const receivedAtPromotion = receiver.received.length;
    await eventually("deliveries flow again after the promotion", () => receiver.received.length > receivedAtPromotion + 10, { timeoutMs: 60_000 }).catch((err: Error) => {
      // What the services said since the kill tells why nothing flowed.
      throw new Error(`${err.message}; received ${receiver.received.length - receivedAtPromotion} since; the services' last log lines:\n${recentLogs(services)}`);
    });
    // The new primary takes intakes too: the load goes on until one is accepted after the promotion
    // (the deliveries above may all be of events accepted before it).
    const { accepted, acceptedAt } = events;
    await eventually("an event is accepted after the promotion", () => accepted.some((id) => (acceptedAt.get(id) ?? 0) > promotedAt), { timeoutMs: 60_000 }).catch((err: Error) => {
      throw new Error(`${err.message}; the services' last log lines:\n${recentLogs(services)}`);
    });
    promoted();
    await load;
    // Delivered: a delivery of the endpoint with no state left (pending, failed and skipped ones have one).
    const eventIdsDelivered = async () => {
      const [rows, states] = await Promise.all([
        h.prisma.webhookDelivery.findMany({ where: { endpointId: endpoint.id }, select: { id: true, eventProducerId: true } }),
        h.prisma.deliveryState.findMany({ where: { endpointId: endpoint.id }, select: { deliveryId: true } }),
      ]);
      const notDelivered = new Set(states.map((s) => s.deliveryId));
      return new Set(rows.filter((r) => !notDelivered.has(r.id)).map((r) => r.eventProducerId));
    };
    await eventually("every accepted event was delivered", async () => {
      const delivered = await eventIdsDelivered();
      return accepted.every((id) => delivered.has(id));
    }, { timeoutMs: 60_000 });
    for (const [name, service] of services) expect([name, service.child.exitCode, service.child.signalCode]).toEqual([name, null, null]);
  } finally {
    promoted();
    await stopServices(services);
    await receiver.close();
  }
}

describe("a primary SIGKILLed under load", () => {
  it("on Sentinel: a replica is promoted, no accepted event is lost, both processes live, deliveries flow again", async () => {
    const group = await startSentinelGroup();
    try {
      await failoverUnderLoad({ REDIS_SENTINELS: group.sentinels, REDIS_SENTINEL_MASTER: group.masterName }, async () => {
        const killed = await group.killPrimary();
        return group.waitForFailover(killed, { timeoutMs: 30_000 });
      });
    } finally {
      await group.stop();
    }
  }, 300_000);

  it("on a Cluster: the replica of the endpoint's shard is promoted, no accepted event is lost, both processes live, deliveries flow again", async () => {
    const cluster = await startRedisCluster();
    try {
      await failoverUnderLoad({ REDIS_CLUSTER_NODES: cluster.seeds }, async (endpointId) => {
        const victim = await cluster.primaryForKey(`{${shardTag(shardOf(endpointId, DEFAULT_QUEUE_SHARDS), DEFAULT_QUEUE_SHARDS)}}`);
        await cluster.kill(victim);
        return cluster.waitForPromotion(victim, { timeoutMs: 30_000 });
      });
    } finally {
      await cluster.stop();
    }
  }, 300_000);
});
