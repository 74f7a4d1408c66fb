/**
 * DrainWakes' waits without Redis (the subscriber only delivers wakes): a lingering drain's wait
 * ends at its time, or false at once when the worker stops, however many drains wait on the
 * worker's one stop signal.
 */
import { describe, expect, it } from "@jest/globals";
import { DrainWakes } from "./drain-wakes.js";
import type { RedisClient } from "./redis-connection.js";

const wakes = () => new DrainWakes({} as RedisClient, "vwtest", () => undefined);

describe("DrainWakes.wait", () => {
  it("ends every wait on a stop signal at once, false, and none twice", async () => {
    const w = wakes();
    const stop = new AbortController();
    const handles = Array.from({ length: 1000 }, (_, i) => w.register(`endpoint-${i}`));
    const waits = handles.map((h) => h.wait(60_000, stop.signal));
    stop.abort();
    expect(await Promise.all(waits)).toEqual(Array(1000).fill(false));
    // A wait that starts once the signal is aborted does not wait either.
    expect(await (handles[0] as (typeof handles)[number]).wait(60_000, stop.signal)).toBe(false);
  });

  it("ends by its time, false, and the stop signal then still ends the waits that remain", async () => {
    const w = wakes();
    const stop = new AbortController();
    const [short, long] = [w.register("a"), w.register("b")];
    expect(await short.wait(1, stop.signal)).toBe(false);
    const pending = long.wait(60_000, stop.signal);
    let settled = 0;
    void pending.then(() => (settled += 1));
    stop.abort();
    expect(await pending).toBe(false);
    expect(settled).toBe(1);
  });
});
