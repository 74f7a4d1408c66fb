/**
 * What JSON the platform accepts, decided once for every service (request bodies, stored and
 * patched WAM files, analytics, job payloads):
 * - text: no NUL (U+0000, which PostgreSQL cannot store in `text`/`jsonb`) and no lone UTF-16
 *   surrogate (not a Unicode scalar value: it cannot be encoded as UTF-8, so it would not survive
 *   a round trip through storage, a signature or another language's JSON parser), in any string,
 *   member names included;
 * - nesting: at most {@link MAX_JSON_DEPTH} levels of objects and arrays, so nothing recursive
 *   (ajv, structuredClone, JSON.stringify, the JSON Patch library, the analytics privacy rules)
 *   can run out of stack on a hostile document.
 *
 * Both checks are iterative: they are safe on any input, however deep.
 */
import type { FieldError } from "./field-error.js";

/**
 * Deepest nesting of objects and arrays accepted anywhere (the document itself is level 1).
 * Real documents stay far below it (a WAM file is about 6 levels deep); it leaves room for open
 * `data` and entity properties while keeping every recursive step's stack use small.
 */
export const MAX_JSON_DEPTH = 64;

/** At most this many problems are reported for one document (a hostile body could hold millions). */
const MAX_REPORTED = 20;

// A NUL, or a high surrogate not followed by a low one, or a low surrogate not preceded by a high
// one. No `u` flag on purpose: the pattern must see UTF-16 code units, not code points.
const UNSAFE_TEXT_RE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `text` is not acceptable platform text, or `undefined` when it is: it contains a NUL
 * character or a lone UTF-16 surrogate.
 */
export function unsafeTextReason(text: string): string | undefined {
  const m = UNSAFE_TEXT_RE.exec(text);
  if (!m) return undefined;
  const code = m[0].charCodeAt(0);
  if (code === 0) return `must not contain a NUL character (U+0000, at offset ${m.index})`;
  return `must not contain a lone surrogate (U+${code.toString(16).toUpperCase()}, at offset ${m.index}): only Unicode scalar values are accepted`;
}

/**
 * Depth of the deepest array or object in raw JSON `text` (a string, or UTF-8 bytes: the
 * characters that matter are ASCII, which never occur inside a multi-byte UTF-8 sequence),
 * stopping as soon as it passes `limit` (returns `limit + 1` then). Strings are skipped, so
 * brackets inside them do not count. Runs before `JSON.parse`, so a body cannot make anything
 * after the parser recurse. The text need not be valid JSON: the parser judges that afterwards.
 */
export function jsonTextDepth(text: string | Uint8Array, limit = MAX_JSON_DEPTH): number {
  const scanner = new JsonDepthScanner(limit);
  scanner.feed(text);
  return scanner.max;
}

/**
 * {@link jsonTextDepth} over text that arrives in chunks (a file streamed out of a zip), so its
 * depth is known without holding it: `feed` each chunk in order, then read `max`.
 */
export class JsonDepthScanner {
  /** Deepest level seen so far (`limit + 1` once past the limit, after which chunks are ignored). */
  max = 0;
  private depth = 0;
  private inString = false;
  private escaped = false;

  constructor(private readonly limit = MAX_JSON_DEPTH) {}

  feed(text: string | Uint8Array): void {
    if (this.max > this.limit) return;
    const at = typeof text === "string" ? (i: number) => text.charCodeAt(i) : (i: number) => text[i]!;
    for (let i = 0; i < text.length; i++) {
      const c = at(i);
      if (this.escaped) {
        this.escaped = false; // the character after a backslash, in this chunk or the next
      } else if (this.inString) {
        if (c === 0x5c) this.escaped = true;
        else if (c === 0x22) this.inString = false;
      } else if (c === 0x22) {
        this.inString = true;
      } else if (c === 0x7b || c === 0x5b) {
        this.depth++;
        if (this.depth > this.max) {
          this.max = this.depth;
          if (this.max > this.limit) return;
        }
      } else if (c === 0x7d || c === 0x5d) {
        this.depth--;
      }
    }
  }
}

/** Encodes one JSON pointer reference token (RFC 6901). */
function token(s: string | number): string {
  return String(s).replace(/~/g, "~0").replace(/\//g, "~1");
}

/**
 * Every place in an already parsed `value` that breaks the platform's JSON rules: a string or
 * member name with a NUL or a lone surrogate, or nesting deeper than `maxDepth`. Each problem is
 * a JSON pointer into `value` (a member name is reported at the member itself, with "name" in the
 * detail). Empty when the value is acceptable. Iterative: safe on any depth.
 */
export function checkJsonValue(value: unknown, maxDepth = MAX_JSON_DEPTH, basePointer = ""): FieldError[] {
  const errors: FieldError[] = [];
  // Depth 0 is a scalar root; an object or array root is level 1.
  const stack: Array<{ value: unknown; pointer: string; depth: number }> = [{ value, pointer: basePointer, depth: 1 }];
  while (stack.length > 0 && errors.length < MAX_REPORTED) {
    const item = stack.pop()!;
    const v = item.value;
    if (typeof v === "string") {
      const reason = unsafeTextReason(v);
      if (reason) errors.push({ pointer: item.pointer, detail: reason });
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    if (item.depth > maxDepth) {
      errors.push({ pointer: item.pointer, detail: `nests deeper than the limit of ${maxDepth} levels of objects and arrays` });
      continue;
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], pointer: `${item.pointer}/${i}`, depth: item.depth + 1 });
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      const pointer = `${item.pointer}/${token(key)}`;
      const reason = unsafeTextReason(key);
      if (reason) {
        errors.push({ pointer, detail: `name ${reason}` });
        continue;
      }
      stack.push({ value: (v as Record<string, unknown>)[key], pointer, depth: item.depth + 1 });
    }
  }
  return errors;
}
