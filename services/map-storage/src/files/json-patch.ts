import jsonpatch from "fast-json-patch";
import type { Operation } from "fast-json-patch";
import { AppError, type FieldError } from "@vw/service-kit";

// fast-json-patch error names, split by what they mean for the client: the patch document itself is
// malformed (400), or it is well formed but cannot apply to the file as it is now (409).
const MALFORMED = new Set([
  "SEQUENCE_NOT_AN_ARRAY",
  "OPERATION_NOT_AN_OBJECT",
  "OPERATION_OP_INVALID",
  "OPERATION_PATH_INVALID",
  "OPERATION_FROM_REQUIRED",
  "OPERATION_VALUE_REQUIRED",
  "OPERATION_VALUE_CANNOT_CONTAIN_UNDEFINED",
]);

interface PatchErrorLike {
  name: string;
  message: string;
  index?: number;
}

function isPatchError(err: unknown): err is PatchErrorLike {
  return err instanceof jsonpatch.JsonPatchError;
}

function firstLine(message: string): string {
  return message.split("\n")[0] ?? message;
}

/**
 * Parses and structurally checks a JSON Patch document (RFC 6902). Throws 400 naming the operation
 * (`/<index>` into the patch) that is malformed.
 */
export function parsePatch(raw: Buffer): Operation[] {
  let ops: unknown;
  try {
    ops = JSON.parse(raw.toString("utf8"));
  } catch (err) {
    throw new AppError(400, "malformed-patch", `The patch is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(ops)) {
    throw new AppError(400, "malformed-patch", "A JSON Patch is an array of operations.", { errors: [{ pointer: "", detail: "must be an array" }] });
  }
  const errors: FieldError[] = [];
  ops.forEach((op, index) => {
    const e = jsonpatch.validate([op as Operation]);
    if (e) errors.push({ pointer: `/${index}`, detail: `${e.name}: ${firstLine(e.message)}` });
  });
  if (errors.length > 0) {
    throw new AppError(400, "malformed-patch", "The patch has malformed operations.", { errors });
  }
  return ops as Operation[];
}

/** ` (replace at /metadata/name)`, ` (move from /a to /b)`: the operation and where in the file it acts. */
function documentPlace(op: Operation | undefined): string {
  if (!op || typeof op !== "object" || typeof op.path !== "string") return "";
  const at = (path: string) => (path === "" ? "the document root" : path);
  const from = (op as { from?: unknown }).from;
  return typeof from === "string" ? ` (${String(op.op)} from ${at(from)} to ${at(op.path)})` : ` (${String(op.op)} at ${at(op.path)})`;
}

/**
 * Applies `ops` to a copy of `doc`, all or nothing. An operation that cannot apply (a failed `test`,
 * a missing path) throws 409 naming it. Prototype-polluting paths are refused by the library.
 */
export function applyPatchAtomically(doc: unknown, ops: Operation[]): unknown {
  const copy: unknown = structuredClone(doc);
  try {
    // validate=true checks each operation against the document before applying it.
    const result = jsonpatch.applyPatch(copy, ops, true, true, true);
    return result.newDocument;
  } catch (err) {
    if (isPatchError(err)) {
      const index = err.index ?? 0;
      const status = MALFORMED.has(err.name) ? 400 : 409;
      const code = status === 400 ? "malformed-patch" : err.name === "TEST_OPERATION_FAILED" ? "patch-test-failed" : "patch-conflict";
      // `/<index>` points into the patch; the client also needs the place in the file it failed on.
      const where = documentPlace(ops[index]);
      throw new AppError(status, code, `Operation ${index}${where} cannot apply: ${firstLine(err.message)}`, {
        errors: [{ pointer: `/${index}`, detail: `${err.name}${where}: ${firstLine(err.message)}` }],
      });
    }
    // The library throws plain TypeErrors for prototype pollution attempts.
    throw new AppError(400, "malformed-patch", `The patch cannot apply: ${(err as Error).message}`);
  }
}
