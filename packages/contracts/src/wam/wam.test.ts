import { describe, it, expect } from "@jest/globals";
import { createAjv } from "../validation.js";
import { SUPPORTED_WAM_VERSIONS, validateWam, wamSchemaDocument, type WamFile } from "./index.js";
import { WAM_2_1_0_SCHEMA, WAM_2_1_0_SCHEMA_ID } from "./wam-2.1.0.schema.js";

const minimal = (): Record<string, unknown> => ({
  version: "2.1.0",
  mapUrl: "https://maps.example.test/office/map.tmj",
  entities: {},
  areas: [],
});

const full = (): WamFile => ({
  version: "2.1.0",
  mapUrl: "https://maps.example.test/office/map.tmj",
  entities: {
    "0b6e7f1c": { prefabRef: { id: "desk", collectionName: "office" }, x: 320, y: 128, properties: [] },
  },
  areas: [{ id: "a1", name: "Meeting room", x: 0, y: 0, width: 96, height: 64, properties: [] }],
  entityCollections: [{ url: "https://collections.example.test/office.json", type: "file" }],
  metadata: {
    name: "Office",
    description: "Our virtual office",
    thumbnail: "https://maps.example.test/office/thumbnail.png",
    copyright: "Tiles by Example Studio",
  },
});

function errorsOf(doc: unknown) {
  const result = validateWam(doc);
  if (result.ok) throw new Error(`expected ${JSON.stringify(doc)} to be refused`);
  return result.errors;
}

describe("validateWam (2.1.0)", () => {
  it("accepts a minimal file: version, mapUrl, empty entities and areas", () => {
    const doc = minimal();
    expect(validateWam(doc)).toEqual({ ok: true, value: doc });
  });

  it("accepts a full file with every field of the spec", () => {
    const doc = full();
    expect(validateWam(doc)).toEqual({ ok: true, value: doc });
  });

  it("accepts entityCollections[].type values other than `file`", () => {
    const doc = { ...minimal(), entityCollections: [{ url: "https://c.example.test/x.json", type: "remote-catalogue" }] };
    expect(validateWam(doc).ok).toBe(true);
  });

  it("accepts unknown top-level members (future fields) and unknown metadata members", () => {
    const doc = { ...minimal(), settings: { megaphone: { enabled: true } }, metadata: { name: "x", tags: ["a"] } };
    expect(validateWam(doc).ok).toBe(true);
  });

  it("refuses entities given as an array, at /entities", () => {
    expect(errorsOf({ ...minimal(), entities: [] })).toEqual([{ pointer: "/entities", detail: "must be object" }]);
  });

  it("refuses areas given as an object, at /areas", () => {
    expect(errorsOf({ ...minimal(), areas: {} })).toEqual([{ pointer: "/areas", detail: "must be array" }]);
  });

  it("reports a missing mapUrl at /mapUrl", () => {
    const { mapUrl: _omitted, ...doc } = minimal();
    expect(errorsOf(doc)).toEqual([{ pointer: "/mapUrl", detail: "is required" }]);
  });

  it("refuses a mapUrl that is not a URL", () => {
    expect(errorsOf({ ...minimal(), mapUrl: "not a url" })).toEqual([
      { pointer: "/mapUrl", detail: "must be a valid uri" },
    ]);
  });

  it("reports wrong metadata types at the member, e.g. /metadata/name", () => {
    expect(errorsOf({ ...minimal(), metadata: { name: 42, copyright: false } })).toEqual([
      { pointer: "/metadata/name", detail: "must be string" },
      { pointer: "/metadata/copyright", detail: "must be string" },
    ]);
  });

  it("checks entityCollections items: url and type required, url a URL", () => {
    expect(
      errorsOf({ ...minimal(), entityCollections: [{ url: "https://ok.test/c.json", type: 1 }, { url: "::" }] }),
    ).toEqual(
      expect.arrayContaining([
        { pointer: "/entityCollections/0/type", detail: "must be string" },
        { pointer: "/entityCollections/1/type", detail: "is required" },
        { pointer: "/entityCollections/1/url", detail: "must be a valid uri" },
      ]),
    );
  });

  it("reports several errors at once, each with its pointer", () => {
    const errors = errorsOf({
      version: "2.1.0",
      entities: [],
      areas: "none",
      entityCollections: {},
      metadata: { description: 1 },
    });
    expect(errors).toEqual(
      expect.arrayContaining([
        { pointer: "/mapUrl", detail: "is required" },
        { pointer: "/entities", detail: "must be object" },
        { pointer: "/areas", detail: "must be array" },
        { pointer: "/entityCollections", detail: "must be array" },
        { pointer: "/metadata/description", detail: "must be string" },
      ]),
    );
    expect(errors).toHaveLength(5);
  });

  it("refuses an unknown version, naming the supported ones", () => {
    expect(validateWam({ ...minimal(), version: "9.9.9" })).toEqual({
      ok: false,
      unsupportedVersion: true,
      errors: [{ pointer: "/version", detail: 'unsupported WAM version "9.9.9"; supported: 2.1.0' }],
    });
  });

  it("reports a missing or non-string version at /version, with the other errors", () => {
    const { version: _omitted, ...noVersion } = minimal();
    expect(validateWam(noVersion)).toEqual({ ok: false, errors: [{ pointer: "/version", detail: "is required" }] });
    expect(errorsOf({ ...minimal(), version: 2.1, areas: {} })).toEqual([
      { pointer: "/version", detail: "must be string" },
      { pointer: "/areas", detail: "must be array" },
    ]);
  });

  it.each([null, [], "2.1.0", 42, true])("refuses a non-object root (%p) at the root pointer", (doc) => {
    expect(validateWam(doc)).toEqual({ ok: false, errors: [{ pointer: "", detail: "must be object" }] });
  });
});

describe("SUPPORTED_WAM_VERSIONS", () => {
  it("lists 2.1.0 and cannot be changed by callers", () => {
    expect(SUPPORTED_WAM_VERSIONS).toEqual(["2.1.0"]);
    expect(Object.isFrozen(SUPPORTED_WAM_VERSIONS)).toBe(true);
  });
});

describe("wamSchemaDocument", () => {
  it("is a draft 2020-12 schema whose $id is the address it is served at", () => {
    const doc = wamSchemaDocument("2.1.0", "https://storage.example.test/");
    expect(doc).toMatchObject({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      $id: "https://storage.example.test/schemas/wam/2.1.0.json",
      title: expect.any(String),
      description: expect.any(String),
      required: ["version", "mapUrl", "entities", "areas"],
    });
  });

  it("is a copy: the compiled schema keeps its internal $id", () => {
    const doc = wamSchemaDocument("2.1.0", "https://a.test");
    (doc as { properties: Record<string, unknown> }).properties["version"] = {};
    expect(WAM_2_1_0_SCHEMA.$id).toBe(WAM_2_1_0_SCHEMA_ID);
    expect(validateWam({ ...minimal(), version: "2.1.0", mapUrl: 1 }).ok).toBe(false);
    expect(wamSchemaDocument("2.1.0", "https://a.test")).toMatchObject({ properties: { version: { const: "2.1.0" } } });
  });

  it("is itself a valid schema that a strict draft 2020-12 ajv compiles and that judges like validateWam", () => {
    const validate = createAjv().compile(wamSchemaDocument("2.1.0", "https://b.test") ?? {});
    expect(validate(full())).toBe(true);
    expect(validate({ ...minimal(), entities: [] })).toBe(false);
  });

  it("is undefined for an unknown version", () => {
    expect(wamSchemaDocument("9.9.9", "https://a.test")).toBeUndefined();
  });
});
