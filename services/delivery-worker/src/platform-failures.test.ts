/**
 * A run that PostgreSQL or Redis could not support is not the receiver's failure: whatever shape
 * the client's error takes, and wherever in the run it comes (reading the delivery before the send,
 * taking the endpoint's slot, writing the attempt after the send), the job waits in the delayed set,
 * the worker's gate hears of the outage, and no attempt is logged nor any failure counted. The
 * delivery log here is an in-memory stand-in that keeps only the writes that "committed"; the
 * POST goes to a real loopback receiver.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DelayedError, type Job } from "bullmq";
import { JOB_NAMES, type EndpointScheduler } from "@vw/queues";
import { Registry } from "@vw/service-kit";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { createDeliveryAgents, destroyDeliveryAgents, type SecretCache } from "@vw/webhook-core";
import { AttemptSlots } from "./attempt-slots.js";
import type { DeliverDeps } from "./deliver.js";
import { processDeliverJob } from "./deliveries.worker.js";
import type { AttemptResult, DeliveryForAttempt, DeliveryStore } from "./delivery-store.js";
import type { EndpointDisabler } from "./endpoint-disabler.js";
import { WorkerMetrics } from "./metrics.js";

/** An error as pg, pg-pool or ioredis raise it: a message and, for some, a code. */
const clientError = (message: string, code?: string): Error => Object.assign(new Error(message), code === undefined ? {} : { code });

/** What PostgreSQL going away (an immediate stop, a restart, a lost connection) looks like to the worker. */
const POSTGRES_ERRORS: [string, Error][] = [
  ["connection refused", clientError("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED")],
  ["connection lost", clientError("Connection terminated unexpectedly")],
  ["connection reset", clientError("read ECONNRESET", "ECONNRESET")],
  ["administrator shutdown (57P01)", clientError("terminating connection due to administrator command", "57P01")],
  ["shutting down (57P03)", clientError("the database system is shutting down", "57P03")],
  ["starting up (57P03)", clientError("the database system is starting up", "57P03")],
  ["pool connect timeout", clientError("timeout exceeded when trying to connect")],
  ["client broken earlier", clientError("Client has encountered a connection error and is not queryable")],
];

const REDIS_ERRORS: [string, Error][] = [
  ["connection closed", clientError("Connection is closed.")],
  ["offline queue off", clientError("Stream isn't writeable and enableOfflineQueue options is false")],
];

/** The delivery log as the run sees it: reads and writes fail while `failing` is set, and only committed writes are kept. */
class FakeLog {
  readonly attempts: AttemptResult[] = [];
  consecutiveFailures = 0;
  failLoad: Error | null = null;
  failRecord: Error | null = null;
  constructor(readonly delivery: DeliveryForAttempt) {}

  store(): DeliveryStore {
    const fake: Pick<DeliveryStore, "load" | "record" | "markSkipped"> = {
      load: async (deliveryId) => {
        if (this.failLoad) throw this.failLoad;
        return deliveryId === this.delivery.deliveryId ? this.delivery : null;
      },
      record: async (result) => {
        if (this.failRecord) throw this.failRecord;
        this.attempts.push(result);
        this.consecutiveFailures = result.succeeded ? 0 : this.consecutiveFailures + 1;
        return this.consecutiveFailures;
      },
      markSkipped: async () => undefined,
    };
    return fake as DeliveryStore;
  }
}

/** The endpoint's slot: granted at once, or failing as Redis would. */
function scheduler(failAcquire: () => Error | null): EndpointScheduler {
  const fake: Pick<EndpointScheduler, "acquireWithin" | "release" | "throttle" | "parkAfter" | "parkTimeoutMs"> = {
    acquireWithin: async () => {
      const err = failAcquire();
      if (err) throw err;
      return { granted: true, waitMs: 0, rate: 0, backlogged: false };
    },
    release: async () => undefined,
    throttle: async () => 0,
    parkAfter: async () => undefined,
    parkTimeoutMs: 1000,
  };
  return fake as EndpointScheduler;
}

/** A BullMQ job of `deliver.v2`, recording where it was moved. */
function deliverJob(delivery: DeliveryForAttempt): { job: Job; delayedUntil: number[] } {
  const delayedUntil: number[] = [];
  const fake = {
    id: randomUUID(),
    name: JOB_NAMES.deliver,
    data: { deliveryId: delivery.deliveryId, endpointId: delivery.endpointId, run: 0 },
    opts: {},
    attemptsStarted: 1,
    moveToDelayed: async (timestamp: number) => {
      delayedUntil.push(timestamp);
    },
  };
  return { job: fake as unknown as Job, delayedUntil };
}

let receiver: WebhookReceiver;
const agents = createDeliveryAgents("any");
beforeAll(async () => {
  receiver = await startWebhookReceiver({ answer: 200 });
});
afterAll(async () => {
  destroyDeliveryAgents(agents);
  await receiver.close();
});

/** One pending delivery to the receiver, its log, and the dependencies of a run over them. */
function setup(failAcquire: () => Error | null = () => null) {
  const delivery: DeliveryForAttempt = {
    deliveryId: randomUUID(),
    endpointId: randomUUID(),
    createdAt: new Date(),
    body: Buffer.from('{"type":"visitor.registered"}'),
    status: "pending",
    attemptCount: 0,
    nextAttemptAt: null,
    run: 0,
    runAttempts: 0,
    test: false,
    url: receiver.url,
    enabled: true,
    secretSealed: null,
    rateLimitPerSecond: null,
  };
  const log = new FakeLog(delivery);
  const disables: unknown[] = [];
  const disabler: Pick<EndpointDisabler, "disable"> = {
    disable: async (info) => {
      disables.push(info);
      return true;
    },
  };
  const deps: DeliverDeps = {
    store: log.store(),
    attempts: new AttemptSlots(4),
    scheduler: scheduler(failAcquire),
    disabler: disabler as EndpointDisabler,
    secrets: { secretOf: () => null } as unknown as SecretCache,
    agents,
    metrics: new WorkerMetrics(new Registry()),
    timeoutMs: 5000,
    retryDelays: [1000],
    disableAfterFailures: 1,
  };
  return { delivery, log, deps, disables };
}

/** Requests the receiver got for `deliveryId`. */
const sent = (deliveryId: string): number => receiver.received.filter((r) => r.headers["webhook-id"] === deliveryId).length;

describe("a run PostgreSQL could not support", () => {
  it.each(POSTGRES_ERRORS)("before the send (%s): nothing sent, nothing logged, the job waits and the gate closes", async (_shape, err) => {
    const { delivery, log, deps, disables } = setup();
    log.failLoad = err;
    const { job, delayedUntil } = deliverJob(delivery);
    const down: unknown[] = [];

    await expect(processDeliverJob(job, "token", deps, (e) => down.push(e))).rejects.toBeInstanceOf(DelayedError);

    expect({ sent: sent(delivery.deliveryId), logged: log.attempts, failures: log.consecutiveFailures, disables, delayed: delayedUntil.length, down }).toEqual({
      sent: 0,
      logged: [],
      failures: 0,
      disables: [],
      delayed: 1,
      down: [err],
    });
  });

  it.each(POSTGRES_ERRORS)("while writing the attempt (%s): nothing logged nor counted; the next run sends again under the same id", async (_shape, err) => {
    const { delivery, log, deps, disables } = setup();
    log.failRecord = err;
    const { job, delayedUntil } = deliverJob(delivery);
    const down: unknown[] = [];

    await expect(processDeliverJob(job, "token", deps, (e) => down.push(e))).rejects.toBeInstanceOf(DelayedError);
    expect({ sent: sent(delivery.deliveryId), logged: log.attempts, failures: log.consecutiveFailures, disables, delayed: delayedUntil.length, down }).toEqual({
      sent: 1,
      logged: [],
      failures: 0,
      disables: [],
      delayed: 1,
      down: [err],
    });

    // PostgreSQL is back: the job runs again, sends the same delivery and logs one delivered attempt.
    log.failRecord = null;
    await expect(processDeliverJob(job, "token", deps)).resolves.toBe("delivered");
    expect({ sent: sent(delivery.deliveryId), verdicts: log.attempts.map((a) => a.attempt.verdict), failures: log.consecutiveFailures }).toEqual({
      sent: 2,
      verdicts: ["delivered"],
      failures: 0,
    });
  });
});

describe("a run Redis could not support", () => {
  it.each(REDIS_ERRORS)("taking the endpoint's slot (%s): nothing sent, nothing logged, the job waits and the gate closes", async (_shape, err) => {
    const { delivery, log, deps } = setup(() => err);
    const { job, delayedUntil } = deliverJob(delivery);
    const down: unknown[] = [];

    await expect(processDeliverJob(job, "token", deps, (e) => down.push(e))).rejects.toBeInstanceOf(DelayedError);
    expect({ sent: sent(delivery.deliveryId), logged: log.attempts, delayed: delayedUntil.length, down }).toEqual({ sent: 0, logged: [], delayed: 1, down: [err] });
  });
});
