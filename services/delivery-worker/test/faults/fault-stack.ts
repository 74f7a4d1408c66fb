/**
 * The stack the fault tests break: a private PostgreSQL and a private Redis (never the machine's:
 * these get crashed, killed and flushed), event-ingest and delivery-worker as separate processes
 * against them, customer-like receivers that verify every signature with `standardwebhooks`, and a
 * producer that posts events at a steady rate and remembers which were accepted (202).
 *
 * What every fault test asserts, after the fault has healed: every accepted event reached each of
 * its endpoints' receivers; every copy of a delivery is byte-identical and all copies for one
 * (event, endpoint) share one deliveryId; the processes are alive; every log line is JSON.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "@jest/globals";
import { createPrismaClient, type PrismaClient } from "@vw/db";
import {
  eventually,
  parsePrometheusText,
  sampleSum,
  spawnService,
  startPostgres,
  startRedis,
  startWebhookReceiver,
  type PrivatePostgres,
  type PrivateRedis,
  type ReceiverAnswer,
  type ServiceProcess,
  type WebhookReceiver,
} from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
// The same migration step as `pnpm db:migrate` (prisma migrate deploy).
import { migrate } from "../../../../scripts/lib/local-infra.mjs";

const servicesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

/** An endpoint of the stack's world and the receiver behind it. */
export interface FaultEndpoint {
  id: string;
  receiver: WebhookReceiver;
  /** The status the receiver answered each request of `receiver.received` with (same order). */
  answered: number[];
}

/** Options of {@link startFaultStack}. */
export interface FaultStackOptions {
  /** Redis with an append-only file (survives a SIGKILL). */
  appendonly?: boolean;
  /** How each receiver answers (one endpoint per entry): a status, or a function that sets `res.statusCode` and ends. */
  receivers: (number | Exclude<ReceiverAnswer, number | "hang">)[];
  /** RETRY_DELAYS of the worker. */
  retryDelays?: string;
  /** Extra environment of both services. */
  env?: Record<string, string>;
  /** Extra environment of one service (on top of `env`). */
  serviceEnv?: Partial<Record<"ingest" | "worker", Record<string, string>>>;
  /** Runs admin-api and map-storage too (against the same stores), so a fault reaches every service. */
  httpServices?: boolean;
  /** DELIVERY_CONCURRENCY of the worker ({@link DEFAULT_DELIVERY_CONCURRENCY} unless given). */
  deliveryConcurrency?: number;
}

/**
 * DELIVERY_CONCURRENCY of the stack's worker: above what its endpoints' windows use at once (two
 * endpoints, DELIVERY_ENDPOINT_CONCURRENCY 10 each), far below the deliveries of a test, so a bound
 * of copies by it says something.
 */
export const DEFAULT_DELIVERY_CONCURRENCY = 20;

/** What one producer run posted, and what was accepted. */
export interface ProducerRun {
  /** Ids of the events answered 202. */
  accepted: string[];
  /** Requests answered otherwise (or not at all), by status (0: no answer). */
  refused: Map<number, number>;
}

/** A running producer of {@link FaultStack.produce}. */
export interface Producer {
  /** Ids of the events accepted so far (a live view). */
  accepted(): readonly string[];
  stop(): Promise<ProducerRun>;
}

/** The producer's id of the event a receiver got (it travels as `data.uuid`). */
const eventOf = (body: Buffer): string => (JSON.parse(body.toString("utf8")) as { data: { uuid: string } }).data.uuid;

/** The stack (see the file comment). */
export interface FaultStack {
  postgres: PrivatePostgres;
  redis: PrivateRedis;
  prisma: PrismaClient;
  ingest: ServiceProcess;
  worker: ServiceProcess;
  /** admin-api and map-storage, when started (`httpServices`). */
  httpServices: ServiceProcess[];
  /** Every service process running now. */
  services(): ServiceProcess[];
  endpoints: FaultEndpoint[];
  /** `<org>/<world>` of the events. */
  worldRef: string;
  /** INGEST_TOKEN of the stack's event-ingest. */
  ingestToken: string;
  /**
   * Starts (again) the process after a kill or a stop, with the same environment; `env` changes
   * it from now on (a configuration rolled out, `QUEUE_SHARDS` say).
   */
  restart(service: "ingest" | "worker", env?: Record<string, string>): Promise<ServiceProcess>;
  /**
   * A rolling update of the worker: starts a replica with `env` (the worker's environment from now
   * on) beside the running one, awaits `whileBoth(old, next)` with both running, then stops the
   * old one (SIGTERM: it must exit 0). The new one is `worker` from then on.
   */
  rollWorker(env: Record<string, string>, whileBoth: (old: ServiceProcess, next: ServiceProcess) => Promise<void>): Promise<ServiceProcess>;
  /** Attempts a worker process made so far (`vw_delivery_attempts_total` of its `/metrics`). */
  attemptsOf(worker: ServiceProcess): Promise<number>;
  /** Posts `perRequest` events every `everyMs` until `stop()`; a request waits at most 5 s. */
  produce(options?: { perRequest?: number; everyMs?: number }): Producer;
  /**
   * Waits until 10 events that `producer` got accepted from now on reached every receiver: the
   * pipeline carries new traffic end to end (deliveries left over from earlier, or retries, do not
   * count). On a timeout it throws with the services' last log lines.
   */
  flowing(producer: Producer, options?: { timeoutMs?: number }): Promise<void>;
  /**
   * DELIVERY_CONCURRENCY of the worker: the attempts one worker process has sent and not yet
   * logged, at most. A fault can make a receiver get a copy of those only, so the extra copies of
   * one fault are at most this times the worker replicas running when it hit (one here).
   */
  deliveryConcurrency: number;
  /**
   * Waits until every accepted event reached every endpoint, then checks copies, processes and
   * logs, and that the extra copies since the last call (deliveries a receiver got again after
   * answering 2xx) are at most `copiesAtMost` (default: the attempts one worker can have in flight,
   * {@link deliveryConcurrency}); returns them.
   */
  verify(run: ProducerRun, options?: { timeoutMs?: number; copiesAtMost?: number }): Promise<number>;
  /** Deliveries not delivered (their `delivery_states` rows), by status. */
  undelivered(): Promise<Record<string, number>>;
  /**
   * Waits until every stored delivery was delivered (no state row left, the retries included), for
   * as long as their number keeps falling: it fails when none was delivered for `stallMs`
   * (60 s), naming what is left, so a slow machine only takes longer.
   */
  allDelivered(options?: { stallMs?: number }): Promise<void>;
  /** GET `/readyz` of a service: its status and the names of the failing checks. */
  readiness(service: ServiceProcess): Promise<{ status: number; failing: string[] }>;
  close(): Promise<void>;
}

/** Starts the stack; `close()` it in afterAll. */
export async function startFaultStack(options: FaultStackOptions): Promise<FaultStack> {
  const postgres = await startPostgres();
  const redis = await startRedis({ appendonly: options.appendonly ?? false });
  const databaseUrl = await postgres.createDatabase("vw");
  await migrate(databaseUrl);
  const prisma = createPrismaClient(databaseUrl, { max: 2 });
  const secretsKey = generateSecretBoxKey();
  const box = createSecretBox(secretsKey);
  const suffix = randomBytes(4).toString("hex");
  const organization = await prisma.organization.create({ data: { slug: `faults-${suffix}`, name: "Faults" } });
  const world = await prisma.world.create({ data: { organizationId: organization.id, slug: "lobby", name: "Lobby", adminEmails: [] } });
  const endpoints: FaultEndpoint[] = [];
  for (const answer of options.receivers) {
    const secret = generateSecret();
    const answered: number[] = [];
    const receiver = await startWebhookReceiver({
      secret,
      answer: (req, res) => {
        if (typeof answer === "number") {
          res.statusCode = answer;
          res.end("ok");
        } else {
          answer(req, res);
        }
        answered.push(res.statusCode);
      },
    });
    const row = await prisma.webhookEndpoint.create({
      data: { worldId: world.id, url: receiver.url, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(secret) },
    });
    endpoints.push({ id: row.id, receiver, answered });
  }
  const ingestToken = randomBytes(24).toString("base64url");
  const deliveryConcurrency = options.deliveryConcurrency ?? DEFAULT_DELIVERY_CONCURRENCY;
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: "faults",
    SECRETS_ENCRYPTION_KEY: secretsKey,
    INGEST_TOKEN: ingestToken,
    ENDPOINT_URL_POLICY: "any",
    RETRY_DELAYS: options.retryDelays ?? "1s",
    DELIVERY_TIMEOUT_MS: "5000",
    DELIVERY_CONCURRENCY: String(deliveryConcurrency),
    // A killed worker's jobs come back within seconds, and a lost job within a sweep.
    JOB_LOCK_MS: "5000",
    RECONCILE_INTERVAL_MS: "2000",
    DELIVERY_RETENTION_DAYS: "36500",
    LOG_LEVEL: "info",
    LOG_FORMAT: "json",
    ...options.env,
  };
  const rolledOut: Record<"ingest" | "worker", Record<string, string>> = { ingest: {}, worker: {} };
  const spawnOf = (service: "ingest" | "worker") =>
    spawnService(join(servicesDir, service === "ingest" ? "event-ingest" : "delivery-worker"), { ...env, ...options.serviceEnv?.[service], ...rolledOut[service] }, { readyTimeoutMs: 60_000 });
  const processes = { ingest: await spawnOf("ingest"), worker: await spawnOf("worker") };
  const httpServices: ServiceProcess[] = [];
  if (options.httpServices) {
    // The S3 server of the test run (S3_* from the jest global setup) serves map-storage.
    const adminToken = randomBytes(24).toString("base64url");
    const mapStorage = await spawnService(join(servicesDir, "map-storage"), { ...env, ADMIN_TOKEN: adminToken }, { readyTimeoutMs: 60_000 });
    httpServices.push(mapStorage);
    httpServices.push(
      await spawnService(join(servicesDir, "admin-api"), (port) => ({ ...env, ADMIN_TOKEN: adminToken, PUBLIC_ADMIN_URL: `http://127.0.0.1:${port}`, MAP_STORAGE_INTERNAL_URL: mapStorage.url }), {
        readyTimeoutMs: 60_000,
      }),
    );
  }
  /** Every process this stack started, to check logs and liveness (killed ones included). */
  const started: ServiceProcess[] = [processes.ingest, processes.worker, ...httpServices];
  const killed = new Set<ServiceProcess>();
  let extraSoFar = 0;
  /** The worker replica started by a rolling update, while the old one still runs. */
  let rolling: ServiceProcess | null = null;

  const stack: FaultStack = {
    postgres,
    redis,
    prisma,
    get ingest() {
      return processes.ingest;
    },
    get worker() {
      return processes.worker;
    },
    httpServices,
    services: () => [processes.ingest, processes.worker, ...(rolling ? [rolling] : []), ...httpServices],
    endpoints,
    worldRef: `${organization.slug}/${world.slug}`,
    ingestToken,
    async restart(service, changed = {}) {
      const old = processes[service];
      if (old.child.exitCode === null && old.child.signalCode === null) throw new Error(`${service} still runs: kill it first`);
      if (old.child.signalCode !== null) killed.add(old);
      Object.assign(rolledOut[service], changed);
      processes[service] = await spawnOf(service);
      started.push(processes[service]);
      return processes[service];
    },
    async rollWorker(changed, whileBoth) {
      const old = processes.worker;
      Object.assign(rolledOut.worker, changed);
      const next = await spawnOf("worker");
      started.push(next);
      rolling = next;
      try {
        await whileBoth(old, next);
      } finally {
        rolling = null;
        processes.worker = next;
      }
      expect({ stopped: old.url, exitCode: await old.stop() }).toEqual({ stopped: old.url, exitCode: 0 });
      return next;
    },
    async attemptsOf(worker) {
      const res = await fetch(`${worker.url}/metrics`, { signal: AbortSignal.timeout(5000) });
      expect(res.status).toBe(200);
      return sampleSum(parsePrometheusText(await res.text()), "vw_delivery_attempts_total");
    },
    produce({ perRequest = 5, everyMs = 50 } = {}) {
      const run: ProducerRun = { accepted: [], refused: new Map() };
      const inFlight = new Set<Promise<void>>();
      const post = async () => {
        const events = Array.from({ length: perRequest }, () => {
          const id = randomUUID();
          // The producer's id travels in the payload, so a receiver can tell which event it got.
          return { id, world: stack.worldRef, type: "visitor.registered", timestamp: new Date().toISOString(), data: { uuid: id, name: "Ada", email: "ada@example.com", via: "sso" } };
        });
        let status = 0;
        try {
          const res = await fetch(`${processes.ingest.url}/v1/events`, {
            method: "POST",
            headers: { authorization: `Bearer ${ingestToken}`, "content-type": "application/json" },
            body: JSON.stringify({ events }),
            signal: AbortSignal.timeout(5000),
          });
          status = res.status;
          await res.arrayBuffer();
        } catch {
          status = 0;
        }
        if (status === 202) run.accepted.push(...events.map((e) => e.id));
        else run.refused.set(status, (run.refused.get(status) ?? 0) + 1);
      };
      const timer = setInterval(() => {
        const p = post().finally(() => inFlight.delete(p));
        inFlight.add(p);
      }, everyMs);
      return {
        accepted: () => run.accepted,
        async stop() {
          clearInterval(timer);
          await Promise.all([...inFlight]);
          return run;
        },
      };
    },
    async allDelivered({ stallMs = 60_000 } = {}) {
      let fewest = Number.POSITIVE_INFINITY;
      let progressAt = Date.now();
      for (;;) {
        const left = await stack.undelivered();
        const count = Object.values(left).reduce((a, b) => a + b, 0);
        if (count === 0) return;
        if (count < fewest) {
          fewest = count;
          progressAt = Date.now();
        } else if (Date.now() - progressAt > stallMs) {
          throw new Error(`deliveries left undelivered, none delivered for ${stallMs} ms: ${JSON.stringify(left)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    },
    async flowing(producer, { timeoutMs = 60_000 } = {}) {
      const from = producer.accepted().length;
      const reachedAll = () => {
        const fresh = producer.accepted().slice(from, from + 10);
        if (fresh.length < 10) return false;
        return endpoints.every(({ receiver }) => {
          const seen = new Set(receiver.received.map((r) => eventOf(r.body)));
          return fresh.every((id) => seen.has(id));
        });
      };
      try {
        await eventually("10 events accepted from now on reach every receiver", reachedAll, { timeoutMs, intervalMs: 100 });
      } catch (err) {
        const tail = (p: ServiceProcess) => p.stdout().split("\n").slice(-30).join("\n");
        throw new Error(
          `${(err as Error).message} (${producer.accepted().length - from} accepted since)\nworker log tail:\n${tail(processes.worker)}\ningest log tail:\n${tail(processes.ingest)}`,
        );
      }
    },
    deliveryConcurrency,
    async verify(run, { timeoutMs = 120_000, copiesAtMost = deliveryConcurrency } = {}) {
      expect(run.accepted.length).toBeGreaterThan(0);
      for (const { receiver } of endpoints) {
        const missing = () => {
          const seen = new Set(receiver.received.filter((r) => r.verifyError === null).map((r) => eventOf(r.body)));
          return run.accepted.filter((id) => !seen.has(id));
        };
        try {
          await eventually(`every one of the ${run.accepted.length} accepted events reached ${receiver.url}`, () => missing().length === 0, { timeoutMs, intervalMs: 250 });
        } catch (err) {
          // What the services said is what a failure needs explained: their last log lines.
          const rows = await stack.undelivered().catch(() => ({}));
          const tail = (p: ServiceProcess) => p.stdout().split("\n").slice(-25).join("\n");
          throw new Error(
            `${(err as Error).message}\n${missing().length} missing; deliveries not delivered, by status: ${JSON.stringify(rows)}\n` +
              `worker log tail:\n${tail(processes.worker)}\ningest log tail:\n${tail(processes.ingest)}`,
          );
        }
      }
      let extra = 0;
      for (const { receiver, answered } of endpoints) {
        expect(receiver.received.filter((r) => r.verifyError !== null).map((r) => r.verifyError)).toEqual([]);
        const byDelivery = new Map<string, Buffer>();
        const deliveryOfEvent = new Map<string, string>();
        for (const r of receiver.received) {
          const deliveryId = String(r.headers["webhook-id"]);
          const first = byDelivery.get(deliveryId);
          if (first) {
            // A copy: byte for byte the first one.
            expect({ deliveryId, identical: first.equals(r.body) }).toEqual({ deliveryId, identical: true });
          } else {
            byDelivery.set(deliveryId, r.body);
          }
          const event = eventOf(r.body);
          const known = deliveryOfEvent.get(event);
          // One event, one endpoint: one deliveryId, however many copies.
          expect({ event, deliveryId: known ?? deliveryId }).toEqual({ event, deliveryId });
          deliveryOfEvent.set(event, deliveryId);
        }
        // An extra copy: one that came after the receiver had already answered 2xx to that deliveryId
        // (a retry after a 503 is the schedule, not a copy).
        const delivered = new Set<string>();
        receiver.received.forEach((r, i) => {
          const deliveryId = String(r.headers["webhook-id"]);
          if (delivered.has(deliveryId)) extra += 1;
          const status = answered[i] ?? 0;
          if (status >= 200 && status < 300) delivered.add(deliveryId);
        });
      }
      for (const service of stack.services()) {
        expect({ url: service.url, exitCode: service.child.exitCode, signal: service.child.signalCode }).toEqual({ url: service.url, exitCode: null, signal: null });
      }
      for (const service of started) assertJsonLogs(service, killed.has(service));
      const since = extra - extraSoFar;
      extraSoFar = extra;
      // Copies come only from attempts sent and not yet logged when the fault hit.
      expect({ extraCopies: since, atMost: copiesAtMost, ok: since <= copiesAtMost }).toEqual({ extraCopies: since, atMost: copiesAtMost, ok: true });
      return since;
    },
    async undelivered() {
      const rows = await prisma.deliveryState.groupBy({ by: ["status"], _count: true });
      return Object.fromEntries(rows.map((r) => [r.status, r._count]));
    },
    async readiness(service) {
      try {
        const res = await fetch(`${service.url}/readyz`, { signal: AbortSignal.timeout(5000) });
        const body = (await res.json()) as { checks?: { name: string; ok: boolean }[] };
        return { status: res.status, failing: (body.checks ?? []).filter((c) => !c.ok).map((c) => c.name) };
      } catch {
        return { status: 0, failing: [] };
      }
    },
    async close() {
      await Promise.all(stack.services().map((p) => p.stop()));
      await prisma.$disconnect();
      await Promise.all(endpoints.map((e) => e.receiver.close()));
      await redis.stop();
      await postgres.stop();
    },
  };
  return stack;
}

/**
 * Every line a service wrote is one JSON object (stdout), and it wrote nothing to stderr. A process
 * killed with SIGKILL may have been cut in the middle of its last line: that one is left out.
 */
function assertJsonLogs(service: ServiceProcess, wasKilled: boolean): void {
  expect({ url: service.url, stderr: service.stderr() }).toEqual({ url: service.url, stderr: "" });
  const text = service.stdout();
  const lines = text.split("\n");
  const complete = text.endsWith("\n") || !wasKilled ? lines : lines.slice(0, -1);
  const notJson = complete.filter((line) => {
    if (line === "") return false;
    try {
      return typeof JSON.parse(line) !== "object";
    } catch {
      return true;
    }
  });
  expect({ url: service.url, notJson: notJson.slice(0, 5) }).toEqual({ url: service.url, notJson: [] });
}

/** Logs the figure a fault test reports (extra copies). */
export function report(fault: string, run: ProducerRun, extra: number): void {
  const refused = [...run.refused].map(([status, n]) => `${n}x ${status || "no answer"}`).join(", ") || "none";
  process.stdout.write(`[faults] ${fault}: ${run.accepted.length} events accepted, all delivered; ${extra} extra copies (same deliveryId, same bytes); requests refused: ${refused}\n`);
}

/** Time limit of one fault test: the fault, its recovery and the wait for every delivery. */
export const FAULT_TEST_TIMEOUT_MS = 300_000;
