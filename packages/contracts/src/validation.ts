import Ajv2020Import from "ajv/dist/2020.js";
import type { Ajv2020, AnySchema, ErrorObject } from "ajv/dist/2020.js";
import addFormatsImport from "ajv-formats";
import type { FieldError } from "./field-error.js";
import { checkJsonValue } from "./json-safety.js";

export type { Ajv2020, ErrorObject } from "ajv/dist/2020.js";
export type { FieldError } from "./field-error.js";

/** Outcome of a validator: the typed value, or every problem found (never just the first). */
export type ValidationResult<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

// ajv and ajv-formats are CommonJS with `exports.default`. Under NodeNext, TypeScript types a default
// import of them as the whole module record, while at run time Node hands out `module.exports`
// (the class itself) and other loaders may hand out the record. Unwrapping `.default` when present
// works for compiled dist, tsx and jest/@swc alike.
type Ajv2020Constructor = typeof Ajv2020;
type AddFormats = (ajv: Ajv2020) => Ajv2020;
const Ajv2020Ctor = unwrapDefault<Ajv2020Constructor>(Ajv2020Import);
const addFormats = unwrapDefault<AddFormats>(addFormatsImport);

function unwrapDefault<T>(imported: unknown): T {
  const record = imported as { default?: T };
  return record.default ?? (imported as T);
}

/**
 * A draft 2020-12 ajv instance configured the way every schema of this project expects: all errors
 * reported, strict schema checking (typos in schemas fail at compile time), formats from ajv-formats.
 * Strict mode includes `strictRequired`: every name in `required` must also appear in `properties`
 * of the same schema object, including inside `then`/`else` branches.
 */
export function createAjv(): Ajv2020 {
  const ajv = new Ajv2020Ctor({ allErrors: true, strict: true, allowUnionTypes: true });
  addFormats(ajv);
  return ajv;
}

let sharedAjv: Ajv2020 | undefined;

/**
 * Compiles `schema` once and returns a function that validates a document against it.
 * Before the schema, the document must hold only platform text and nest at most
 * `MAX_JSON_DEPTH` levels (see json-safety.ts): ajv recurses, and PostgreSQL refuses NUL, so a
 * document breaking those rules is refused here with a pointer to each place, whatever the schema.
 * Call it at module load (or cache its result); compiling per request is slow.
 * Without `ajv`, one shared instance from {@link createAjv} is used; ajv caches compilations by
 * schema object, so compiling the same object twice is cheap, but two different schema objects
 * with the same `$id` on one instance is an error.
 */
export function compileValidator<T>(schema: object, ajv?: Ajv2020): (data: unknown) => ValidationResult<T> {
  const instance = ajv ?? (sharedAjv ??= createAjv());
  const validate = instance.compile<T>(schema as AnySchema);
  return (data: unknown): ValidationResult<T> => {
    const unsafe = checkJsonValue(data);
    if (unsafe.length > 0) return { ok: false, errors: unsafe };
    // ajv's guard is typed on an `any` parameter, so it does not narrow `unknown`; it did check `T`.
    if (validate(data)) return { ok: true, value: data as T };
    return { ok: false, errors: toFieldErrors(validate.errors ?? []) };
  };
}

/** Encodes one JSON pointer reference token (RFC 6901): `~` becomes `~0`, `/` becomes `~1`. */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** What a refused `date-time` is told: RFC 3339 requires the offset, which is what is usually missing. */
export const DATE_TIME_DETAIL = "must be an RFC 3339 date-time with a time-zone offset or Z, such as 2026-11-22T09:15:30Z or 2026-11-22T10:15:30+01:00";

const WRAPPER_KEYWORDS = new Set(["if", "anyOf", "oneOf"]);

/**
 * Turns ajv errors into field errors: a JSON pointer to the member concerned (the missing or
 * extra member itself for `required`/`additionalProperties`) and a human sentence.
 * The summary errors ajv adds for `if`, `anyOf` and `oneOf` are dropped when an error from inside
 * the same subtree explains the failure; duplicates are removed and several type errors at one
 * pointer (the branches of an `anyOf`) become one ("must be string or number").
 */
export function toFieldErrors(errors: ErrorObject[]): FieldError[] {
  const kept = errors.filter((error) => !isRedundantWrapper(error, errors));
  const out: FieldError[] = [];
  const seen = new Set<string>();
  const typesAt = new Map<string, { index: number; types: string[] }>();
  for (const error of kept) {
    const pointer = pointerOf(error);
    if (error.keyword === "type") {
      const types = asList(error.params["type"]);
      const existing = typesAt.get(pointer);
      if (existing) {
        for (const t of types) if (!existing.types.includes(t)) existing.types.push(t);
        out[existing.index] = { pointer, detail: `must be ${joinOr(existing.types)}` };
        continue;
      }
      typesAt.set(pointer, { index: out.length, types: [...types] });
    }
    const fieldError = { pointer, detail: detailOf(error) };
    const key = `${fieldError.pointer}\u0000${fieldError.detail}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(fieldError);
  }
  return out;
}

function isRedundantWrapper(error: ErrorObject, all: ErrorObject[]): boolean {
  // "is not an allowed member name" says less than the errors about that name ajv reports beside it.
  if (error.keyword === "propertyNames") {
    return all.some((other) => other !== error && other.instancePath === error.instancePath && other.propertyName === error.params["propertyName"]);
  }
  if (!WRAPPER_KEYWORDS.has(error.keyword)) return false;
  // A oneOf that failed because several branches matched has no branch errors to stand in for it.
  if (error.keyword === "oneOf" && Array.isArray(error.params["passingSchemas"])) return false;
  return all.some(
    (other) =>
      other !== error &&
      !WRAPPER_KEYWORDS.has(other.keyword) &&
      isAtOrBelow(other.instancePath, error.instancePath),
  );
}

function isAtOrBelow(pointer: string, ancestor: string): boolean {
  return pointer === ancestor || pointer.startsWith(`${ancestor}/`);
}

function pointerOf(error: ErrorObject): string {
  const base = error.instancePath;
  const params = error.params;
  switch (error.keyword) {
    case "required":
    case "dependentRequired":
      return `${base}/${escapePointerToken(String(params["missingProperty"]))}`;
    case "additionalProperties":
      return `${base}/${escapePointerToken(String(params["additionalProperty"]))}`;
    case "unevaluatedProperties":
      return `${base}/${escapePointerToken(String(params["unevaluatedProperty"]))}`;
    case "propertyNames":
      return `${base}/${escapePointerToken(String(params["propertyName"]))}`;
    default:
      // Errors raised while checking a member *name* (inside propertyNames) carry that name.
      return error.propertyName === undefined ? base : `${base}/${escapePointerToken(error.propertyName)}`;
  }
}

function detailOf(error: ErrorObject): string {
  const p = error.params;
  const detail = ((): string => {
    switch (error.keyword) {
      case "required":
        return "is required";
      case "dependentRequired":
        return `is required when "${String(p["property"])}" is present`;
      case "additionalProperties":
      case "unevaluatedProperties":
      case "false schema":
        return "is not allowed";
      case "type":
        return `must be ${joinOr(asList(p["type"]))}`;
      case "enum":
        return `must be one of: ${asList(p["allowedValues"]).join(", ")}`;
      case "const":
        return `must be ${JSON.stringify(p["allowedValue"])}`;
      case "format":
        // ajv-formats' date-time needs the offset, the part a producer most often leaves out.
        if (p["format"] === "date-time") return DATE_TIME_DETAIL;
        return `must be a valid ${String(p["format"])}`;
      case "pattern":
        return `must match the pattern ${String(p["pattern"])}`;
      case "minLength":
        return `must be at least ${String(p["limit"])} characters long`;
      case "maxLength":
        return `must be at most ${String(p["limit"])} characters long`;
      case "minItems":
        return `must have at least ${String(p["limit"])} items`;
      case "maxItems":
        return `must have at most ${String(p["limit"])} items`;
      case "minProperties":
        return `must have at least ${String(p["limit"])} members`;
      case "maxProperties":
        return `must have at most ${String(p["limit"])} members`;
      case "minimum":
      case "maximum":
      case "exclusiveMinimum":
      case "exclusiveMaximum":
        return `must be ${String(p["comparison"])} ${String(p["limit"])}`;
      case "multipleOf":
        return `must be a multiple of ${String(p["multipleOf"])}`;
      case "uniqueItems":
        return `must not contain duplicate items (items ${String(p["j"])} and ${String(p["i"])} are equal)`;
      case "propertyNames":
        return "is not an allowed member name";
      case "anyOf":
        return "must match one of the allowed shapes";
      case "oneOf":
        return "must match exactly one of the allowed shapes";
      case "not":
        return "must not match the excluded shape";
      default:
        return error.message ?? `is invalid (${error.keyword})`;
    }
  })();
  return error.propertyName === undefined || error.keyword === "propertyNames" ? detail : `name ${detail}`;
}

function asList(value: unknown): string[] {
  return Array.isArray(value) ? value.map(String) : [String(value)];
}

function joinOr(items: string[]): string {
  return items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} or ${items.at(-1)}`;
}
