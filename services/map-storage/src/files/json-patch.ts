import jsonpatch from "fast-json-patch";
import type { Operation } from "fast-json-patch";
import { AppError, parseJsonBytes, type FieldError } from "@vw/service-kit";
import { jsonStringBytes, measureJson } from "./json-size.js";

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
 * Parses and structurally checks a JSON Patch document (RFC 6902) under the platform's JSON rules
 * (UTF-8, nesting limit, no NUL or lone surrogate: service-kit `parseJsonBytes`). Throws 400 naming
 * the operation (`/<index>` into the patch) that is malformed, 413 when it has more than
 * `maxOperations` (MAX_PATCH_OPERATIONS) operations.
 */
export function parsePatch(raw: Buffer, maxOperations: number): Operation[] {
  let ops: unknown;
  try {
    ops = parseJsonBytes(raw, "The patch", true);
  } catch (err) {
    // Unparseable JSON is a malformed patch; the other refusals keep their own type.
    if (err instanceof AppError && err.code === "malformed-json") throw new AppError(400, "malformed-patch", err.detail);
    throw err;
  }
  if (!Array.isArray(ops)) {
    throw new AppError(400, "malformed-patch", "A JSON Patch is an array of operations.", { errors: [{ pointer: "", detail: "must be an array" }] });
  }
  if (ops.length > maxOperations) {
    throw new AppError(413, "payload-too-large", `The patch has ${ops.length} operations; the limit is ${maxOperations} (MAX_PATCH_OPERATIONS).`, { limit: maxOperations });
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

/** What a patch may make of a document. */
export interface PatchBounds {
  /** Largest serialized result, in bytes (MAX_JSON_FILE_BYTES). */
  maxBytes: number;
  /** Most levels of objects and arrays (MAX_JSON_DEPTH). */
  maxDepth: number;
}

/** A patched document and an upper bound of its serialized size. */
export interface PatchedDocument {
  doc: unknown;
  bytes: number;
  /** True when `bytes` may be above the real size (something was removed or replaced): worth re-measuring before refusing. */
  inflated: boolean;
}

/** How many times one patch may re-measure the whole document when its running estimate passes the cap. */
const MAX_REMEASURES = 2;
/** Bytes of work (measured, copied) after which applying yields to the event loop, so other requests are answered meanwhile. */
const YIELD_EVERY_BYTES = 256 * 1024;

/** Levels a value put at `pointer` sits under: `/a/b` is inside two. */
const pointerDepth = (pointer: string): number => (pointer === "" ? 0 : pointer.split("/").length - 1);

/** The value at `pointer`, or undefined when there is none (the operation then fails as it applies). */
function valueAt(doc: unknown, pointer: string): unknown {
  try {
    return jsonpatch.getValueByPointer(doc, pointer);
  } catch {
    return undefined;
  }
}

/**
 * Bytes an operation may add, measured within `budget`: the value of an `add` or `replace`, the
 * subtree a `copy` duplicates, plus the new member's name. Nothing is subtracted for what `remove`,
 * `replace` and `move` take away (an upper bound, cheap to keep), so a document that shrinks and
 * grows again is re-measured instead (see {@link applyPatchBounded}).
 */
function growth(doc: unknown, op: Operation, budget: number): { bytes: number; depth: number; over: boolean } {
  const name = op.path === "" ? 0 : jsonStringBytes(op.path.slice(op.path.lastIndexOf("/") + 1)) + 2;
  let added: { bytes: number; depth: number; over: boolean } = { bytes: 0, depth: 0, over: false };
  if (op.op === "add" || op.op === "replace") added = measureJson(op.value, budget - name);
  else if (op.op === "copy") added = measureJson(valueAt(doc, op.from), budget - name);
  else if (op.op !== "move") return added;
  return { bytes: added.bytes + name, depth: added.depth, over: added.over || added.bytes + name > budget };
}

function tooLarge(index: number, maxBytes: number): AppError {
  const detail = `Operation ${index} would make the file larger than ${maxBytes} bytes (MAX_JSON_FILE_BYTES); nothing was changed.`;
  return new AppError(413, "payload-too-large", detail, { limit: maxBytes, errors: [{ pointer: `/${index}`, detail }] });
}

/**
 * Applies `ops` to a copy of `doc` (whose serialized size is at most `from.bytes`), all or
 * nothing, within `bounds`: the size the result could reach is tracked as each operation applies,
 * so a patch that would grow the document past `bounds.maxBytes` (26 copies of the root double it
 * 26 times) is refused with 413 before the operation that crosses the cap runs, after a few
 * operations and a few MB of work at most, and a copy that would nest it past `bounds.maxDepth`
 * with 422. Each operation's work is bounded by the cap, and the event loop is given back between
 * operations once a good deal of work was done, so a large patch never stalls other requests. An
 * operation that cannot apply (a failed `test`, a missing path) throws 409 naming it.
 * Prototype-polluting paths are refused by the library.
 */
export async function applyPatchBounded(doc: unknown, from: { bytes: number; inflated: boolean }, ops: Operation[], bounds: PatchBounds): Promise<PatchedDocument> {
  let current: unknown = structuredClone(doc);
  let { bytes, inflated } = from;
  let remeasured = 0;
  let work = 0;
  for (const [index, op] of ops.entries()) {
    let added = growth(current, op, bounds.maxBytes - bytes);
    // The estimate only grows: when it may be above the truth, measure what the document is now.
    while (added.over && inflated && remeasured < MAX_REMEASURES) {
      remeasured++;
      bytes = measureJson(current, bounds.maxBytes).bytes;
      inflated = false;
      work += bytes;
      added = growth(current, op, bounds.maxBytes - bytes);
    }
    if (added.over) throw tooLarge(index, bounds.maxBytes);
    // A copy can double the depth at each step, so it is stopped before it runs; what an `add`
    // nests is its own value's (parsed within the limit), judged on the result with a pointer into it.
    if (op.op === "copy" && pointerDepth(op.path) + added.depth > bounds.maxDepth) {
      throw new AppError(422, "too-deeply-nested", `Operation ${index} would nest the file deeper than ${bounds.maxDepth} levels; nothing was changed.`, {
        limit: bounds.maxDepth,
        errors: [{ pointer: `/${index}`, detail: `nests deeper than the limit of ${bounds.maxDepth} levels of objects and arrays` }],
      });
    }
    current = applyOne(current, op, index, ops);
    // What replaces the whole document is measured alone; anything else adds to the estimate.
    const wholeDocument = op.path === "" && (op.op === "add" || op.op === "replace" || op.op === "copy");
    bytes = wholeDocument ? added.bytes : bytes + added.bytes;
    if (op.op === "remove" || op.op === "replace" || op.op === "move") inflated = true;
    work += added.bytes * (op.op === "copy" ? 3 : 1);
    if (work >= YIELD_EVERY_BYTES) {
      work = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  return { doc: current, bytes, inflated };
}

/** Applies one operation in place (the document may be replaced whole); errors become problems. */
function applyOne(doc: unknown, op: Operation, index: number, ops: Operation[]): unknown {
  try {
    // validate=true checks the operation against the document before applying it.
    return jsonpatch.applyOperation(doc, op, true, true, true, index).newDocument;
  } catch (err) {
    if (isPatchError(err)) {
      const at = err.index ?? index;
      const status = MALFORMED.has(err.name) ? 400 : 409;
      const code = status === 400 ? "malformed-patch" : err.name === "TEST_OPERATION_FAILED" ? "patch-test-failed" : "patch-conflict";
      // `/<index>` points into the patch; the client also needs the place in the file it failed on.
      const where = documentPlace(ops[at]);
      throw new AppError(status, code, `Operation ${at}${where} cannot apply: ${firstLine(err.message)}`, {
        errors: [{ pointer: `/${at}`, detail: `${err.name}${where}: ${firstLine(err.message)}` }],
      });
    }
    // The library throws plain TypeErrors for prototype pollution attempts.
    throw new AppError(400, "malformed-patch", `The patch cannot apply: ${(err as Error).message}`);
  }
}
