import { describe, expect, it } from "@jest/globals";
import { eventKey, inLockOrder } from "./ingest.service.js";

describe("inLockOrder", () => {
  it("gives the same order whatever the request order, by world then producer id", () => {
    const keys = [eventKey("w2", "a"), eventKey("w1", "b"), eventKey("w1", "a"), eventKey("w1", "a~"), eventKey("w10", "a")];
    const forward = new Map(keys.map((k) => [k, k]));
    const backward = new Map([...keys].reverse().map((k) => [k, k]));
    const expected = [eventKey("w1", "a"), eventKey("w1", "a~"), eventKey("w1", "b"), eventKey("w10", "a"), eventKey("w2", "a")];
    expect(inLockOrder(forward)).toEqual(expected);
    expect(inLockOrder(backward)).toEqual(expected);
  });

  it("keeps a world's ids together even when one id is a prefix of another world's id", () => {
    expect(eventKey("w1", "x")).not.toBe(eventKey("w1x", ""));
  });
});
