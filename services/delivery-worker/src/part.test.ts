import { describe, expect, it } from "@jest/globals";
import type { Logger } from "@vw/service-kit";
import { Parts, type Part } from "./part.js";

const errors: unknown[] = [];
const logger = { error: (...args: unknown[]) => errors.push(args), warn: () => undefined, info: () => undefined, debug: () => undefined } as unknown as Logger;

/** A part that records when its close starts and ends in `events`, after `closeMs`. */
function recorded(name: string, events: string[], options: { closeMs?: number; fails?: boolean } = {}): Part {
  return {
    name,
    async close() {
      events.push(`${name} closing`);
      await new Promise((resolve) => setTimeout(resolve, options.closeMs ?? 0));
      events.push(`${name} closed`);
      if (options.fails) throw new Error(`${name} failed`);
    },
  };
}

describe("Parts", () => {
  it("closes the parts in the reverse of their start, each after the next one has closed", async () => {
    const events: string[] = [];
    const parts = new Parts(logger);
    for (const name of ["shards", "deliveries", "reconciler"]) parts.add(recorded(name, events, { closeMs: 5 }));
    await parts.close();
    expect(events).toEqual(["reconciler closing", "reconciler closed", "deliveries closing", "deliveries closed", "shards closing", "shards closed"]);
    // Closed once: a second close has nothing left.
    await parts.close();
    expect(events).toHaveLength(6);
  });

  it("closes the others when one fails to close, and logs it", async () => {
    const events: string[] = [];
    errors.length = 0;
    const parts = new Parts(logger);
    parts.add(recorded("a", events));
    parts.add(recorded("b", events, { fails: true }));
    parts.add(recorded("c", events));
    await parts.close();
    expect(events.filter((e) => e.endsWith("closed"))).toEqual(["c closed", "b closed", "a closed"]);
    expect(errors).toHaveLength(1);
  });

  it("closes a group together, at its turn", async () => {
    const events: string[] = [];
    const parts = new Parts(logger);
    parts.add(recorded("first", events));
    parts.add(recorded("slow", events, { closeMs: 20 }));
    parts.add(recorded("quick", events));
    parts.closeTogether("group", 2);
    parts.add(recorded("last", events));
    await parts.close();
    expect(events).toEqual(["last closing", "last closed", "slow closing", "quick closing", "quick closed", "slow closed", "first closing", "first closed"]);
  });

  it("when a part fails to start, closes those already started and throws", async () => {
    const events: string[] = [];
    const parts = new Parts(logger);
    await expect(
      parts.startAll(async (p) => {
        p.add(recorded("shards", events));
        p.add(recorded("mail", events));
        throw new Error("scheduling failed");
      }),
    ).rejects.toThrow("scheduling failed");
    expect(events).toEqual(["mail closing", "mail closed", "shards closing", "shards closed"]);
  });
});
