import { describe, expect, it } from "@jest/globals";
import type { Logger } from "@vw/service-kit";
import { DeferredHookCalls } from "./auth-hook-deferred.js";

const warnings: unknown[] = [];
const logger = (() => {
  const noop = (): void => undefined;
  const l = { trace: noop, debug: noop, info: noop, warn: (fields: unknown) => void warnings.push(fields), error: noop, fatal: noop, child: () => l };
  return l as unknown as Logger;
})();

/** A call that records its start and finishes when the test says so. */
function gate(name: string, log: string[]) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    call: async () => {
      log.push(`start ${name}`);
      await opened;
      log.push(`end ${name}`);
    },
    open: () => open(),
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("DeferredHookCalls", () => {
  it("runs one world's calls one at a time in order, and different worlds side by side", async () => {
    const log: string[] = [];
    const calls = new DeferredHookCalls({ logger });
    const [a1, a2, b1] = [gate("a1", log), gate("a2", log), gate("b1", log)];
    expect(calls.enqueue("world-a", [a1.call, a2.call])).toBe(2);
    expect(calls.enqueue("world-b", [b1.call])).toBe(1);
    await tick();
    expect(log).toEqual(["start a1", "start b1"]);
    a1.open();
    await tick();
    expect(log).toEqual(["start a1", "start b1", "end a1", "start a2"]);
    a2.open();
    b1.open();
    await calls.drain();
    expect(log.filter((l) => l.startsWith("end"))).toEqual(["end a1", "end a2", "end b1"]);
    expect(calls.waiting).toBe(0);
  });

  it("keeps at most maxQueued calls waiting in the process, dropping and reporting the rest", async () => {
    const log: string[] = [];
    let dropped = 0;
    const calls = new DeferredHookCalls({ logger, maxQueued: 3, onDropped: (n) => (dropped += n) });
    const gates = ["a", "b", "c", "d", "e"].map((n) => gate(n, log));
    // w1's first call starts at once; its second waits.
    expect(calls.enqueue("w1", gates.slice(0, 2).map((g) => g.call))).toBe(2);
    expect(calls.waiting).toBe(1);
    // Room for two more waiting calls: c (which starts at once on its own lane) and d; e is dropped.
    expect(calls.enqueue("w2", gates.slice(2).map((g) => g.call))).toBe(2);
    expect(calls.waiting).toBe(2);
    expect(dropped).toBe(1);
    expect(warnings).toContainEqual(expect.objectContaining({ world: "w2", dropped: 1 }));
    for (const g of gates) g.open();
    await calls.drain();
    expect(log.filter((l) => l.startsWith("end")).sort()).toEqual(["end a", "end b", "end c", "end d"]);
  });

  it("goes on with the next call when one throws", async () => {
    const calls = new DeferredHookCalls({ logger });
    const done: string[] = [];
    calls.enqueue("w", [
      async () => {
        throw new Error("boom");
      },
      async () => void done.push("second"),
    ]);
    await calls.drain();
    expect(done).toEqual(["second"]);
  });
});
