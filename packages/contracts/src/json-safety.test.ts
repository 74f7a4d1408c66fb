import { describe, expect, it } from "@jest/globals";
import { JsonDepthScanner, MAX_JSON_DEPTH, checkJsonValue, jsonTextDepth, unsafeTextReason } from "./json-safety.js";
import { compileValidator } from "./validation.js";

const nest = (depth: number): unknown => {
  let v: unknown = {};
  for (let i = 1; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
};

describe("platform text", () => {
  it("accepts any well-formed Unicode, surrogate pairs included", () => {
    for (const ok of ["", "plain", "ünïcödé", "😀 emoji", "\u0001\u007f control but not NUL", "\ud83d\ude00"]) expect(unsafeTextReason(ok)).toBeUndefined();
  });

  it("refuses NUL and lone surrogates, high or low, wherever they are", () => {
    for (const bad of ["\u0000", "a\u0000", "\ud800", "x\ud800y", "\udc00", "\ud83d", "a\ude00", "\ude00\ud83d"]) {
      expect(unsafeTextReason(bad)).toMatch(/NUL|lone surrogate/);
    }
  });
});

describe("checkJsonValue", () => {
  it("names each string and member name that is not platform text with a JSON pointer", () => {
    const errors = checkJsonValue({ a: ["ok", "b\u0000"], "k/\ud800": 1, n: { "~": "\udfff" } });
    expect(errors).toHaveLength(3);
    expect(errors).toEqual(
      expect.arrayContaining([
        { pointer: "/a/1", detail: expect.stringContaining("NUL") },
        { pointer: "/k~1\ud800", detail: expect.stringMatching(/^name .*lone surrogate/) },
        { pointer: "/n/~0", detail: expect.stringContaining("lone surrogate") },
      ]),
    );
  });

  it("allows exactly MAX_JSON_DEPTH levels and names where a deeper document passes it", () => {
    expect(checkJsonValue(nest(MAX_JSON_DEPTH))).toEqual([]);
    const errors = checkJsonValue(nest(MAX_JSON_DEPTH + 1));
    expect(errors).toHaveLength(1);
    expect(errors[0]!.detail).toContain("deeper than the limit of 64");
  });

  it("is iterative: a million levels are refused without overflowing the stack", () => {
    const deep = JSON.parse(`${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}`) as unknown;
    expect(checkJsonValue(deep)).toHaveLength(1);
  });

  it("runs in front of every compiled validator, so no schema accepts NUL or runs ajv on a deep document", () => {
    const validate = compileValidator<unknown>({ type: "object" });
    expect(validate({ name: "a\u0000" })).toEqual({ ok: false, errors: [{ pointer: "/name", detail: expect.stringContaining("NUL") }] });
    expect(validate(nest(10_000)).ok).toBe(false);
    expect(validate({ name: "fine" }).ok).toBe(true);
  });
});

describe("jsonTextDepth", () => {
  it("counts object and array levels of raw text, ignoring brackets inside strings", () => {
    expect(jsonTextDepth('{"a":[1,{"b":"[[[{{{"}]}')).toBe(3);
    expect(jsonTextDepth('"\\"[[["')).toBe(0);
    expect(jsonTextDepth(Buffer.from('[[["\\"]"]]]'))).toBe(3);
  });

  it("stops as soon as the limit is passed", () => {
    expect(jsonTextDepth("[".repeat(5_000_000), 64)).toBe(65);
  });

  it("gives the same depth fed chunk by chunk, wherever a chunk ends (inside a string, after a backslash)", () => {
    const text = '{"a":[1,{"b":"[[[{{\\\"{"}],"c":[[[[]]]]}';
    for (let cut = 0; cut <= text.length; cut++) {
      const scanner = new JsonDepthScanner();
      scanner.feed(Buffer.from(text.slice(0, cut)));
      scanner.feed(Buffer.from(text.slice(cut)));
      expect([cut, scanner.max]).toEqual([cut, jsonTextDepth(text)]);
    }
    expect(jsonTextDepth(text)).toBe(5);
  });
});
