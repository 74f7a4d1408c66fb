import { describe, it, expect, jest } from "@jest/globals";
import type { ErrorObject } from "ajv/dist/2020.js";
import { compileValidator, createAjv, escapePointerToken, toFieldErrors } from "./validation.js";

describe("createAjv", () => {
  it("is strict: an unknown keyword in a schema fails at compile time", () => {
    expect(() => compileValidator({ type: "object", requird: ["a"] }, createAjv())).toThrow(/unknown keyword/);
  });

  it("is strict: a required member missing from `properties` (a typo) fails at compile time", () => {
    expect(() =>
      compileValidator({ type: "object", properties: { mapUrl: {} }, required: ["mapurl"] }, createAjv()),
    ).toThrow(/strictRequired/);
  });

  it("knows the ajv-formats formats", () => {
    const validate = compileValidator<string>({ type: "string", format: "uri" }, createAjv());
    expect(validate("https://example.test/a").ok).toBe(true);
    expect(validate("not a uri")).toEqual({ ok: false, errors: [{ pointer: "", detail: "must be a valid uri" }] });
  });

  it("reports all errors, not only the first", () => {
    const validate = compileValidator(
      {
        type: "object",
        properties: { a: { type: "string" }, b: { type: "integer" }, c: {} },
        required: ["a", "b", "c"],
      },
      createAjv(),
    );
    const result = validate({ a: 1 });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual(
      expect.arrayContaining([
        { pointer: "/b", detail: "is required" },
        { pointer: "/c", detail: "is required" },
        { pointer: "/a", detail: "must be string" },
      ]),
    );
    expect(result.errors).toHaveLength(3);
  });
});

describe("compileValidator", () => {
  it("returns the validated value itself on success", () => {
    const doc = { a: "x" };
    const validate = compileValidator<{ a: string }>({ type: "object", properties: { a: { type: "string" } } });
    const result = validate(doc);
    expect(result).toEqual({ ok: true, value: doc });
    expect(result.ok && result.value).toBe(doc);
  });

  it("compiles once, not per validation", () => {
    const ajv = createAjv();
    const compile = jest.spyOn(ajv, "compile");
    const validate = compileValidator({ type: "string" }, ajv);
    validate("a");
    validate(1);
    validate("b");
    expect(compile).toHaveBeenCalledTimes(1);
  });

  it("points at the missing member for `required`, escaping `~` and `/`", () => {
    const validate = compileValidator(
      {
        type: "object",
        properties: {
          "x/y": {
            type: "object",
            properties: { "a/b": { type: "string" }, "c~d": { type: "string" } },
            required: ["a/b", "c~d"],
          },
          "top~/": {},
        },
        required: ["x/y", "top~/"],
      },
      createAjv(),
    );
    const result = validate({ "x/y": {} });
    expect(result).toEqual({
      ok: false,
      errors: expect.arrayContaining([
        { pointer: "/top~0~1", detail: "is required" },
        { pointer: "/x~1y/a~1b", detail: "is required" },
        { pointer: "/x~1y/c~0d", detail: "is required" },
      ]),
    });
    expect(!result.ok && result.errors).toHaveLength(3);
  });

  it("points at the extra member for `additionalProperties`", () => {
    const validate = compileValidator(
      {
        type: "object",
        properties: { inner: { type: "object", additionalProperties: false } },
        additionalProperties: false,
      },
      createAjv(),
    );
    expect(validate({ "e~/f": 1, inner: { "g/h": true } })).toEqual({
      ok: false,
      errors: [
        { pointer: "/e~0~1f", detail: "is not allowed" },
        { pointer: "/inner/g~1h", detail: "is not allowed" },
      ],
    });
  });

  it("uses the empty pointer for the root and instance paths for other keywords", () => {
    const validate = compileValidator(
      {
        type: "object",
        properties: {
          kind: { enum: ["a", "b"] },
          list: { type: "array", items: { type: "string", minLength: 2 } },
        },
      },
      createAjv(),
    );
    expect(validate([])).toEqual({ ok: false, errors: [{ pointer: "", detail: "must be object" }] });
    expect(validate({ kind: "c", list: ["ok", "x"] })).toEqual({
      ok: false,
      errors: [
        { pointer: "/kind", detail: "must be one of: a, b" },
        { pointer: "/list/1", detail: "must be at least 2 characters long" },
      ],
    });
  });
});

describe("toFieldErrors noise removal", () => {
  it("drops the anyOf wrapper and merges the branch type errors", () => {
    const validate = compileValidator(
      { type: "object", properties: { x: { anyOf: [{ type: "string" }, { type: "number" }] } } },
      createAjv(),
    );
    expect(validate({ x: true })).toEqual({ ok: false, errors: [{ pointer: "/x", detail: "must be string or number" }] });
  });

  it("drops the if/then wrapper when the then-branch error is present", () => {
    const validate = compileValidator(
      {
        type: "object",
        properties: { kind: { type: "string" }, url: { type: "string" } },
        if: { properties: { kind: { const: "link" } }, required: ["kind"] },
        then: { properties: { url: true }, required: ["url"] },
      },
      createAjv(),
    );
    expect(validate({ kind: "link" })).toEqual({ ok: false, errors: [{ pointer: "/url", detail: "is required" }] });
  });

  it("drops the oneOf wrapper when no branch matched", () => {
    const validate = compileValidator(
      {
        oneOf: [
          { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
          { type: "object", properties: { b: { type: "string" } }, required: ["b"] },
        ],
      },
      createAjv(),
    );
    const result = validate({});
    expect(result).toEqual({
      ok: false,
      errors: [
        { pointer: "/a", detail: "is required" },
        { pointer: "/b", detail: "is required" },
      ],
    });
  });

  it("keeps the oneOf wrapper when several branches matched (nothing more precise exists)", () => {
    const validate = compileValidator({ oneOf: [{ type: "string" }, { type: "string", minLength: 1 }] }, createAjv());
    expect(validate("abc")).toEqual({
      ok: false,
      errors: [{ pointer: "", detail: "must match exactly one of the allowed shapes" }],
    });
  });

  it("removes duplicates", () => {
    const error: ErrorObject = {
      keyword: "type",
      instancePath: "/a",
      schemaPath: "#/properties/a/type",
      params: { type: "string" },
    };
    const required: ErrorObject = {
      keyword: "required",
      instancePath: "",
      schemaPath: "#/required",
      params: { missingProperty: "b" },
    };
    expect(toFieldErrors([error, { ...error }, required, { ...required }])).toEqual([
      { pointer: "/a", detail: "must be string" },
      { pointer: "/b", detail: "is required" },
    ]);
  });
});

describe("escapePointerToken", () => {
  it("escapes ~ before / as RFC 6901 requires", () => {
    expect(escapePointerToken("a~/b")).toBe("a~0~1b");
    expect(escapePointerToken("~1")).toBe("~01");
  });
});
