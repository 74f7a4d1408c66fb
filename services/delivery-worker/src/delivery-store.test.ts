/**
 * The log write of an attempt already made waits out a PostgreSQL outage instead of failing the
 * job (which would send the delivery again): tried again while the error says PostgreSQL is
 * unavailable, within its bound and until the worker closes; a write that had committed before
 * the connection dropped is recognised (its attempt id is already logged) and not written twice.
 */
import { describe, expect, it } from "@jest/globals";
import type { AttemptResult, DeliveryLog } from "@vw/db";
import { eventually } from "@vw/testing";
import { DeliveryStore } from "./delivery-store.js";

const refused = (): Error => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
const duplicate = (): Error => Object.assign(new Error('duplicate key value violates unique constraint "delivery_attempts_pkey"'), { code: "23505" });

/** An attempt result; only the attempt id matters to the fake log. */
function result(id: string): AttemptResult {
  return {
    attempt: { id } as AttemptResult["attempt"],
    endpointId: "ep",
    deliveryCreatedAt: new Date(),
    status: "delivered",
    nextAttemptAt: null,
    counts: true,
    succeeded: true,
  };
}

/** A log whose `recordAttempts` answers from `answer` (called with the ids of each statement), keeping what it committed. */
function fakeLog(answer: (ids: string[], call: number) => "commit" | Error) {
  const committed: string[] = [];
  const statements: string[][] = [];
  const log = {
    recordAttempts: async (results: readonly AttemptResult[]) => {
      const ids = results.map((r) => r.attempt.id);
      statements.push(ids);
      const outcome = answer(ids, statements.length);
      if (outcome !== "commit") throw outcome;
      committed.push(...ids);
      return results.map(() => 0);
    },
    loadForAttempt: async () => [],
  };
  return { log: log as unknown as DeliveryLog, committed, statements };
}

describe("DeliveryStore.record while PostgreSQL is away", () => {
  it("tries the write again until PostgreSQL answers, and logs the attempt once", async () => {
    const { log, committed, statements } = fakeLog((_, call) => (call <= 3 ? refused() : "commit"));
    const store = new DeliveryStore(log, { recordRetryMs: 5000, recordRetryFirstWaitMs: 10 });
    await expect(store.record(result("a1"))).resolves.toBe(0);
    expect(statements).toHaveLength(4);
    expect(committed).toEqual(["a1"]);
  });

  it("gives the error to the job past its bound", async () => {
    const { log, committed } = fakeLog(() => refused());
    const store = new DeliveryStore(log, { recordRetryMs: 100, recordRetryFirstWaitMs: 10 });
    const started = Date.now();
    await expect(store.record(result("a1"))).rejects.toThrow("ECONNREFUSED");
    expect(Date.now() - started).toBeLessThan(2000);
    expect(committed).toEqual([]);
  });

  it("does not try again an error that is not an outage", async () => {
    const { log, statements } = fakeLog(() => new Error('column "x" does not exist'));
    const store = new DeliveryStore(log, { recordRetryMs: 5000, recordRetryFirstWaitMs: 10 });
    await expect(store.record(result("a1"))).rejects.toThrow("does not exist");
    expect(statements).toHaveLength(1);
  });

  it("stops waiting once the worker closes", async () => {
    const { log, statements } = fakeLog(() => refused());
    const store = new DeliveryStore(log, { recordRetryMs: 60_000, recordRetryFirstWaitMs: 20 });
    const recording = store.record(result("a1"));
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
      if (ids.includes("a1") && committedOnce.has("a1")) return duplicate();
      return "commit";
    });
    const committedOnce = new Set(["a1"]);
    const store = new DeliveryStore(log, { recordRetryMs: 5000, recordRetryFirstWaitMs: 10 });
    const [first, second] = await Promise.all([store.record(result("a1")), store.record(result("a2"))]);
    expect(first).toBeNull();
    expect(second).toBe(0);
    expect(committed).toEqual(["a2"]);
  });
});
