import { describe, expect, it } from "@jest/globals";
import { addCounts, nodeShares, platformCommands, total, type CommandReading } from "./node-counters.js";

const reading = (entries: Record<string, number>): CommandReading => new Map(Object.entries(entries).map(([name, calls]) => [name, { calls, usec: calls * 2 }]));

describe("Redis work over several nodes", () => {
  it("counts the platform's commands between two readings, the benchmark's own INFO and PING left out", () => {
    const before = reading({ evalsha: 10, hget: 5, info: 3, ping: 1 });
    const after = reading({ evalsha: 40, hget: 5, info: 9, ping: 4, zadd: 7 });
    expect(platformCommands(before, after)).toEqual(new Map([["evalsha", 30], ["zadd", 7]]));
    expect(total(platformCommands(before, after))).toBe(37);
  });

  it("adds the nodes' counts together", () => {
    expect(addCounts([new Map([["evalsha", 3]]), new Map([["evalsha", 4], ["del", 1]])])).toEqual(new Map([["evalsha", 7], ["del", 1]]));
  });

  it("says each node's share and the busiest one's", () => {
    expect(nodeShares([30, 30, 40])).toEqual({ shares: [0.3, 0.3, 0.4], busiest: 0.4 });
    // Everything on one primary (one hash tag for every key) reads 100%.
    expect(nodeShares([0, 120, 0]).busiest).toBe(1);
    expect(nodeShares([0, 0]).busiest).toBe(1);
  });
});
