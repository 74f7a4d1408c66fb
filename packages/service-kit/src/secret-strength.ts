/**
 * Start-up checks of the static bearer tokens (ADMIN_TOKEN, INGEST_TOKEN): a token an attacker
 * can guess must stop the process, not protect it. The messages name the variable and what is
 * wrong, never the value or a part of it.
 */

/** Shortest accepted static token (`openssl rand -hex 32` gives 64 characters). */
export const MIN_TOKEN_LENGTH = 32;

/** Fewest distinct characters an accepted token has (a random 32-character hex token has about 15). */
export const MIN_TOKEN_DISTINCT_CHARACTERS = 10;

/**
 * Why `value` is too weak to be the bearer token held in `variable`, or null when it can stand:
 * shorter than {@link MIN_TOKEN_LENGTH}, fewer than {@link MIN_TOKEN_DISTINCT_CHARACTERS} distinct
 * characters, or one short pattern repeated (`abcabcabc…`, `0123401234…`). An empty value is left
 * to the "is required" check.
 */
export function weakTokenProblem(variable: string, value: string): string | null {
  if (value === "") return null;
  const advice = "make one with `openssl rand -hex 32`";
  const length = [...value].length;
  if (length < MIN_TOKEN_LENGTH) return `${variable} must be at least ${MIN_TOKEN_LENGTH} characters long, got ${length}; ${advice}`;
  const distinct = new Set(value).size;
  if (distinct < MIN_TOKEN_DISTINCT_CHARACTERS) {
    return `${variable} has only ${distinct} distinct characters (at least ${MIN_TOKEN_DISTINCT_CHARACTERS} needed): it is guessable; ${advice}`;
  }
  const period = repetitionPeriod(value);
  if (period !== null) return `${variable} repeats one ${period}-character pattern: it is guessable; ${advice}`;
  return null;
}

/** The length of the shortest pattern `value` is made of repeated (a partial last copy allowed), or null. */
function repetitionPeriod(value: string): number | null {
  const chars = [...value];
  // Patterns up to half the length: a longer "pattern" would be repeated less than twice.
  for (let period = 1; period <= chars.length / 2; period += 1) {
    let repeated = true;
    for (let i = period; i < chars.length && repeated; i += 1) repeated = chars[i] === chars[i - period];
    if (repeated) return period;
  }
  return null;
}
