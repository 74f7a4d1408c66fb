import { compileValidator, type FieldError, type ValidationResult } from "../validation.js";
import { WAM_2_1_0_SCHEMA } from "./wam-2.1.0.schema.js";

export { WAM_2_1_0_SCHEMA, WAM_2_1_0_SCHEMA_ID } from "./wam-2.1.0.schema.js";

/** A collection of objects offered in the inline map editor. */
export interface WamEntityCollection {
  url: string;
  /** `file` is the value the product writes; other strings are accepted. */
  type: string;
  [member: string]: unknown;
}

/** Descriptive information about a map; every field is optional. */
export interface WamMetadata {
  name?: string;
  description?: string;
  thumbnail?: string;
  copyright?: string;
  [member: string]: unknown;
}

/** A WAM file (version 2.1.0) that passed {@link validateWam}. Unknown members are kept as they are. */
export interface WamFile {
  version: string;
  mapUrl: string;
  /** Item content is not constrained by the spec. */
  entities: Record<string, unknown>;
  /** Item content is not constrained by the spec. */
  areas: unknown[];
  entityCollections?: WamEntityCollection[];
  metadata?: WamMetadata;
  [member: string]: unknown;
}

/** Result of {@link validateWam} for a document whose `version` no known schema covers. */
export interface UnsupportedWamVersion {
  ok: false;
  unsupportedVersion: true;
  errors: FieldError[];
}

const SCHEMAS: ReadonlyMap<string, object> = new Map<string, object>([["2.1.0", WAM_2_1_0_SCHEMA]]);

/** WAM versions this build can validate and serve a schema for, oldest first. */
export const SUPPORTED_WAM_VERSIONS: readonly string[] = Object.freeze([...SCHEMAS.keys()]);

/** Version whose schema judges documents that carry no usable `version`. */
const CURRENT_WAM_VERSION = "2.1.0";

const validators = new Map<string, (data: unknown) => ValidationResult<WamFile>>();

function validatorFor(version: string): ((data: unknown) => ValidationResult<WamFile>) | undefined {
  let validate = validators.get(version);
  if (validate) return validate;
  const schema = SCHEMAS.get(version);
  if (!schema) return undefined;
  validate = compileValidator<WamFile>(schema);
  validators.set(version, validate);
  return validate;
}

/**
 * Validates a WAM document against the schema of the version it declares.
 * An unknown `version` is refused with `unsupportedVersion: true` and an error at `/version`
 * naming the supported versions. A missing or non-string `version` is an ordinary validation error,
 * reported together with every other error the current version's schema finds.
 */
export function validateWam(doc: unknown): ValidationResult<WamFile> | UnsupportedWamVersion {
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    return { ok: false, errors: [{ pointer: "", detail: "must be object" }] };
  }
  const version: unknown = (doc as Record<string, unknown>)["version"];
  if (typeof version === "string") {
    const validate = validatorFor(version);
    if (validate) return validate(doc);
    return {
      ok: false,
      unsupportedVersion: true,
      errors: [
        {
          pointer: "/version",
          detail: `unsupported WAM version ${JSON.stringify(version)}; supported: ${SUPPORTED_WAM_VERSIONS.join(", ")}`,
        },
      ],
    };
  }
  const current = validatorFor(CURRENT_WAM_VERSION);
  if (!current) throw new Error(`no WAM schema registered for the current version ${CURRENT_WAM_VERSION}`);
  const result = current(doc);
  // The current schema would add `must be "2.1.0"` next to the type error; one clear message is enough.
  const versionError: FieldError = {
    pointer: "/version",
    detail: version === undefined ? "is required" : "must be string",
  };
  const others = result.ok ? [] : result.errors.filter((e) => e.pointer !== "/version");
  return { ok: false, errors: [versionError, ...others] };
}

/**
 * The JSON Schema of a WAM version as served at `GET /schemas/wam/<version>.json`, with `$id` set to
 * that address under `baseUrl` (trailing slashes ignored). A fresh copy on every call, so callers
 * may change it. `undefined` for a version that is not supported.
 */
export function wamSchemaDocument(version: string, baseUrl: string): Record<string, unknown> | undefined {
  const schema = SCHEMAS.get(version);
  if (!schema) return undefined;
  const copy = structuredClone(schema) as Record<string, unknown>;
  copy["$id"] = `${baseUrl.replace(/\/+$/, "")}/schemas/wam/${version}.json`;
  return copy;
}
