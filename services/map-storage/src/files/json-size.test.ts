import { describe, expect, it } from "@jest/globals";
import { jsonStringBytes, measureJson } from "./json-size.js";

const serialized = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8");

describe("measureJson", () => {
  it("is exact for plain values and never below JSON.stringify's size", () => {
    for (const value of [null, true, false, 0, -1.5e300, "", "ascii", { a: [1, "two", { three: null }] }, [], {}]) {
      expect([value, measureJson(value, 1e9).bytes]).toEqual([value, serialized(value)]);
    }
    const awkward = ["é ü 😀", 'quote " backslash \\ slash /', "\n\t\u0001\u001f", "\u2028", 1e21, 5e-324, -0];
    const value = { awkward, nested: { list: awkward.map((a) => ({ [String(a)]: [a, { a }] })) }, "kéy \"\n": awkward };
    const m = measureJson(value, 1e9);
    expect(m.over).toBe(false);
    expect(m.bytes).toBeGreaterThanOrEqual(serialized(value));
    expect(m.bytes).toBeLessThan(serialized(value) * 1.5);
  });

  it("counts depth as the nesting limit does (a scalar 0, {} 1)", () => {
    expect(measureJson("x", 100).depth).toBe(0);
    expect(measureJson({}, 100).depth).toBe(1);
    expect(measureJson({ a: [[{}]] }, 100).depth).toBe(4);
  });

  it("stops as soon as the budget is passed, without walking the rest", () => {
    const huge = { s: "x".repeat(10_000_000), more: Array.from({ length: 100_000 }, (_, i) => ({ i })) };
    const m = measureJson(huge, 1000);
    expect(m.over).toBe(true);
    expect(m.bytes).toBeGreaterThan(1000);
    expect(m.bytes).toBeLessThan(20_000_000);
  });

  it("walks a value nested far deeper than the stack could recurse", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(measureJson(deep, 1e9)).toEqual({ bytes: 400_001, depth: 200_000, over: false });
  });
});

describe("jsonStringBytes", () => {
  it("counts UTF-8 bytes with quotes, and escapes at no less than their size", () => {
    expect(jsonStringBytes("é")).toBe(serialized("é"));
    expect(jsonStringBytes('a"b\\c\n\u0001')).toBeGreaterThanOrEqual(serialized('a"b\\c\n\u0001'));
  });
});
