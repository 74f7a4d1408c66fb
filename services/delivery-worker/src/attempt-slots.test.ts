import { describe, expect, it } from "@jest/globals";
import { AttemptSlots } from "./attempt-slots.js";

/** Lets every settled promise run its continuations. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("AttemptSlots", () => {
  it("hands out at most its size, then serves waiters in the order they asked", async () => {
    const slots = new AttemptSlots(2);
    const first = await slots.take();
    const second = await slots.take();
    const order: string[] = [];
    const a = slots.take().then((release) => (order.push("a"), release));
    const b = slots.take().then((release) => (order.push("b"), release));
    await settle();
    expect(order).toEqual([]);
    expect(slots.inUse).toBe(2);
    expect(slots.queued).toBe(2);

    second();
    await settle();
    expect(order).toEqual(["a"]);
    expect(slots.inUse).toBe(2);
    first();
    await settle();
    expect(order).toEqual(["a", "b"]);
    (await a)();
    (await b)();
    expect(slots.inUse).toBe(0);
    expect(slots.queued).toBe(0);
  });

  it("counts a release called twice once", async () => {
    const slots = new AttemptSlots(1);
    const release = await slots.take();
    release();
    release();
    expect(slots.inUse).toBe(0);
    const again = await slots.take();
    expect(slots.inUse).toBe(1);
    // A second release of the first holder must not free the slot the second holder has.
    release();
    expect(slots.inUse).toBe(1);
    again();
    expect(slots.inUse).toBe(0);
  });

  it("refuses a size that is not a positive integer", () => {
    expect(() => new AttemptSlots(0)).toThrow(RangeError);
    expect(() => new AttemptSlots(1.5)).toThrow(RangeError);
  });
});
