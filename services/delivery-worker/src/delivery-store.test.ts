/**
 * The worker's side of the delivery log, against a fake log (the SQL is tested in @vw/db):
 * - the log write of an attempt already made waits out a PostgreSQL outage instead of failing the
 *   drain (which would send the delivery again): tried again while the error says PostgreSQL is
 *   unavailable, within its bound and until the worker closes; a write that had committed before
 *   the connection dropped is recognised (its attempt id is already logged) and not written twice;
 *   a deadlock is run again, a bounded number of times;
 * - the claims of the drains of a moment go in one statement with the drains' lease, and each
 *   drain gets its own endpoint's rows back.
 */
import { describe, expect, it } from "@jest/globals";
import type { AttemptApplication, ClaimedDelivery, DeliveryLog } from "@vw/db";
import { eventually } from "@vw/testing";
import { DeliveryStore } from "./delivery-store.js";

const LEASE_MS = 30_000;
const refused = (): Error => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
const duplicate = (): Error => Object.assign(new Error('duplicate key value violates unique constraint "delivery_attempts_pkey"'), { code: "23505" });
const deadlock = (): Error => Object.assign(new Error("deadlock detected"), { code: "40P01" });

/** An attempt's application; only the attempt id and the endpoint matter to the fake log. */
function application(id: string, endpointId = "ep"): AttemptApplication {
  return {
    attempt: { id } as AttemptApplication["attempt"],
    endpointId,
    deliveryCreatedAt: new Date(),
    becomes: "delivered",
    dueAt: null,
    waitReason: null,
    run: 0,
    failures: "reset",
  };
}

/** A claimed row of `endpointId`; only its ids matter here. */
function claimed(deliveryId: string, endpointId: string): ClaimedDelivery {
  return { deliveryId, endpointId } as ClaimedDelivery;
}

/**
 * A log whose `record` answers from `answer` (called with the attempt ids of each statement),
 * keeping what it committed; a committed statement says each endpoint's failure count is 0.
 */
function fakeLog(answer: (ids: string[], call: number) => "commit" | Error) {
  const committed: string[] = [];
  const statements: string[][] = [];
  const log = {
    record: async (applications: readonly AttemptApplication[]) => {
      const ids = applications.map((a) => a.attempt.id);
      statements.push(ids);
      const outcome = answer(ids, statements.length);
      if (outcome !== "commit") throw outcome;
      committed.push(...ids);
      return new Map(applications.map((a) => [a.endpointId, 0]));
    },
  };
  return { log: log as unknown as DeliveryLog, committed, statements };
}

describe("DeliveryStore.record while PostgreSQL is away", () => {
  it("tries the write again until PostgreSQL answers, and logs the attempt once", async () => {
    const { log, committed, statements } = fakeLog((_, call) => (call <= 3 ? refused() : "commit"));
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS, recordRetryMs: 5000, recordRetryFirstWaitMs: 10 });
    await expect(store.record(application("a1"))).resolves.toBe(0);
    expect(statements).toHaveLength(4);
    expect(committed).toEqual(["a1"]);
  });

  it("gives the error to the drain past its bound", async () => {
    const { log, committed, statements } = fakeLog(() => refused());
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS, recordRetryMs: 100, recordRetryFirstWaitMs: 10 });
    await expect(store.record(application("a1"))).rejects.toThrow("ECONNREFUSED");
    // Tried more than once (10, 20, 40 ms waits fit in the bound), and never committed.
    expect(statements.length).toBeGreaterThan(1);
    expect(committed).toEqual([]);
  });

  it("does not try again an error that is not an outage", async () => {
    const { log, statements } = fakeLog(() => new Error('column "x" does not exist'));
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS, recordRetryMs: 5000, recordRetryFirstWaitMs: 10 });
    await expect(store.record(application("a1"))).rejects.toThrow("does not exist");
    expect(statements).toHaveLength(1);
  });

  it("stops waiting once the worker closes", async () => {
    const { log, statements } = fakeLog(() => refused());
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS, recordRetryMs: 60_000, recordRetryFirstWaitMs: 20 });
    const recording = store.record(application("a1"));
    recording.catch(() => undefined);
    await eventually("the write was tried again", () => statements.length >= 2, { intervalMs: 5 });
    store.stopRetrying();
    await expect(recording).rejects.toThrow("ECONNREFUSED");
    // Nothing can be waited on for a write that must not happen: five of its first waits pass.
    const tries = statements.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(statements).toHaveLength(tries);
  });

  it("a write that had committed before the connection dropped is not logged twice, and the rest of its batch is written", async () => {
    // a1's first write committed but its answer was lost: its try again finds its id logged.
    const { log, committed } = fakeLog((ids, call) => {
      if (call === 1) return refused();
      if (ids.includes("a1")) return duplicate();
      return "commit";
    });
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS, recordRetryMs: 5000, recordRetryFirstWaitMs: 10 });
    const [first, second] = await Promise.all([store.record(application("a1", "ep-1")), store.record(application("a2", "ep-2"))]);
    // The failure count after a1 is not known (its statement wrote nothing); a2's is.
    expect(first).toBeUndefined();
    expect(second).toBe(0);
    expect(committed).toEqual(["a2"]);
  });
});

describe("DeliveryStore.record's group commit", () => {
  it("writes the attempts of one moment in one statement, and each gets its own endpoint's failure count", async () => {
    const statements: string[][] = [];
    const log = {
      record: async (applications: readonly AttemptApplication[]) => {
        statements.push(applications.map((a) => a.attempt.id));
        return new Map([
          ["ep-1", 3],
          ["ep-2", 7],
        ]);
      },
    } as unknown as DeliveryLog;
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS });
    const counts = await Promise.all([store.record(application("a1", "ep-1")), store.record(application("a2", "ep-2")), store.record(application("a3", "ep-3"))]);
    expect(statements).toEqual([["a1", "a2", "a3"]]);
    // ep-3's count did not change in that statement: undefined, not 0.
    expect(counts).toEqual([3, 7, undefined]);
  });

  it("runs a statement that deadlocked again (nothing was written), but not forever", async () => {
    const again = fakeLog((_, call) => (call <= 2 ? deadlock() : "commit"));
    await expect(new DeliveryStore(again.log, { leaseMs: LEASE_MS }).record(application("a1"))).resolves.toBe(0);
    expect(again.committed).toEqual(["a1"]);
    expect(again.statements).toHaveLength(3);

    const always = fakeLog(() => deadlock());
    await expect(new DeliveryStore(always.log, { leaseMs: LEASE_MS }).record(application("a1"))).rejects.toThrow("deadlock");
    expect(always.statements).toHaveLength(5);
  });
});

describe("DeliveryStore.claim", () => {
  it("claims for every drain of the moment in one statement, with the lease, and hands each drain its endpoint's rows", async () => {
    const calls: { requests: { endpointId: string; limit: number }[]; leaseMs: number }[] = [];
    const log = {
      claim: async (requests: readonly { endpointId: string; limit: number }[], leaseMs: number) => {
        calls.push({ requests: [...requests], leaseMs });
        return [claimed("d1", "ep-1"), claimed("d2", "ep-2"), claimed("d3", "ep-1")];
      },
    } as unknown as DeliveryLog;
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS });
    const [one, two, three] = await Promise.all([store.claim("ep-1", 8), store.claim("ep-2", 4), store.claim("ep-3", 4)]);
    expect(calls).toEqual([
      {
        requests: [
          { endpointId: "ep-1", limit: 8 },
          { endpointId: "ep-2", limit: 4 },
          { endpointId: "ep-3", limit: 4 },
        ],
        leaseMs: LEASE_MS,
      },
    ]);
    expect(one!.map((d) => d.deliveryId)).toEqual(["d1", "d3"]);
    expect(two!.map((d) => d.deliveryId)).toEqual(["d2"]);
    expect(three).toEqual([]);
  });

  it("two claims for one endpoint in one statement ask for both limits, and no row goes to both", async () => {
    const asked: number[] = [];
    const log = {
      claim: async (requests: readonly { endpointId: string; limit: number }[]) => {
        asked.push(...requests.map((r) => r.limit));
        return [claimed("d1", "ep-1"), claimed("d2", "ep-1")];
      },
    } as unknown as DeliveryLog;
    const store = new DeliveryStore(log, { leaseMs: LEASE_MS });
    const [first, second] = await Promise.all([store.claim("ep-1", 2), store.claim("ep-1", 3)]);
    expect(asked).toEqual([5]);
    const ids = [...first!, ...second!].map((d) => d.deliveryId);
    expect(ids.sort()).toEqual(["d1", "d2"]);
  });
});
