/**
 * How large and how deep a parsed JSON value is once serialized, measured by walking it (never by
 * serializing it) and only as far as a budget: a walk stops as soon as it has counted more bytes
 * than it may, so measuring a copy of a huge subtree costs no more than the room left under the
 * size cap. Iterative, so a value nested deeper than the stack could recurse is measured too.
 */

/** What {@link measureJson} found: `bytes` is an upper bound of `JSON.stringify(value)`'s UTF-8 size. */
export interface JsonMeasure {
  /** Bytes counted (when `over`, as far as the walk went: more than the budget). */
  bytes: number;
  /** Levels of objects and arrays (a scalar is 0, `{}` is 1), as far as the walk went. */
  depth: number;
  /** True when the value is larger than the budget; the walk stopped there. */
  over: boolean;
}

// Characters JSON.stringify escapes: `"`, `\` (2 bytes each) and controls (up to 6, `\u001f`).
const ESCAPED = /[\u0000-\u001f"\\]/g;

/** Serialized UTF-8 size of a string, quotes included; an upper bound (every escape counted as 6 bytes). */
export function jsonStringBytes(s: string): number {
  let escapes = 0;
  ESCAPED.lastIndex = 0;
  while (ESCAPED.exec(s) !== null) escapes++;
  return Buffer.byteLength(s, "utf8") + 2 + 5 * escapes;
}

function scalarBytes(value: unknown): number {
  if (typeof value === "number") return Number.isFinite(value) ? String(value).length : 4;
  if (typeof value === "boolean") return value ? 4 : 5;
  return 4; // null (and what JSON.stringify writes as null)
}

/**
 * Measures `value` (a parsed JSON value: objects, arrays, strings, numbers, booleans, null) up to
 * `budget` bytes. A string longer than what is left is known to be over without being scanned
 * (its UTF-8 form is never shorter than its UTF-16 length).
 */
export function measureJson(value: unknown, budget: number): JsonMeasure {
  let bytes = 0;
  let depth = 0;
  const stack: { value: unknown; level: number }[] = [{ value, level: 0 }];
  while (stack.length > 0) {
    const { value: v, level } = stack.pop()!;
    if (typeof v === "string") {
      if (bytes + v.length + 2 > budget) return { bytes: bytes + v.length + 2, depth, over: true };
      bytes += jsonStringBytes(v);
    } else if (typeof v !== "object" || v === null) {
      bytes += scalarBytes(v);
    } else {
      if (level + 1 > depth) depth = level + 1;
      if (Array.isArray(v)) {
        bytes += 2 + Math.max(0, v.length - 1);
        for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], level: level + 1 });
      } else {
        const keys = Object.keys(v);
        bytes += 2 + Math.max(0, keys.length - 1);
        for (const key of keys) {
          if (bytes + key.length + 3 > budget) return { bytes: bytes + key.length + 3, depth, over: true };
          bytes += jsonStringBytes(key) + 1;
          stack.push({ value: (v as Record<string, unknown>)[key], level: level + 1 });
        }
      }
    }
    if (bytes > budget) return { bytes, depth, over: true };
  }
  return { bytes, depth, over: false };
}
