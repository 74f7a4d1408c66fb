/**
 * The retry schedule (spec: Limits > Retries, Retry delays; config `RETRY_DELAYS`).
 *
 * Delays are relative to the failed attempt. Jitter only ever lengthens a delay (up to +10%),
 * so a receiver is never retried sooner than the documented schedule, while retries of many
 * deliveries that failed together (an outage) spread out instead of arriving in one burst.
 */

/** The spec's schedule: 9 retries, 10 attempts in all, over about three days. */
export const DEFAULT_RETRY_DELAYS_TEXT = "5s,5m,30m,2h,5h,10h,14h,20h,24h";

/** Maximum extra delay as a fraction of the delay ("each up to 10% longer at random"). */
export const RETRY_JITTER_FRACTION = 0.1;

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Thrown by {@link parseRetryDelays}; the message names the variable and the bad item. */
export class RetryScheduleError extends Error {
  override readonly name = "RetryScheduleError";
}

/**
 * Parses a comma-separated list of delays such as `5s,5m,30m,2h`: a non-negative number (a
 * fraction is allowed) followed by `ms`, `s`, `m`, `h` or `d`. Whitespace around items is ignored.
 * The number of items is the number of retries.
 *
 * @param variable name used in error messages
 * @returns delays in whole milliseconds
 * @throws RetryScheduleError naming the bad item and its position
 */
export function parseRetryDelays(text: string, variable = "RETRY_DELAYS"): number[] {
  if (text.trim() === "") throw new RetryScheduleError(`${variable} is empty: expected a list such as "${DEFAULT_RETRY_DELAYS_TEXT}"`);
  return text.split(",").map((raw, index) => {
    const item = raw.trim();
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(item);
    if (!match) {
      throw new RetryScheduleError(
        `${variable} item ${index + 1} "${item}" is not a delay: expected a number followed by ms, s, m, h or d (for example 5s or 2h)`,
      );
    }
    const [, amount, unit] = match as unknown as [string, string, keyof typeof UNIT_MS];
    const ms = Math.round(Number(amount) * UNIT_MS[unit]);
    if (!Number.isSafeInteger(ms)) throw new RetryScheduleError(`${variable} item ${index + 1} "${item}" is too large`);
    return ms;
  });
}

/** {@link DEFAULT_RETRY_DELAYS_TEXT} in milliseconds. */
export const DEFAULT_RETRY_DELAYS: readonly number[] = Object.freeze(parseRetryDelays(DEFAULT_RETRY_DELAYS_TEXT));

/**
 * The delay before the next attempt, or null when no retry is left.
 *
 * @param attemptNumber attempts already made (1 after the first attempt failed)
 * @param delays the schedule; attempt n is followed by `delays[n - 1]`
 * @param random a source of numbers in [0, 1); injectable for tests
 * @returns `delay × (1 + random() × 0.10)` rounded down to whole ms (never below the delay), or null
 */
export function nextDelay(attemptNumber: number, delays: readonly number[], random: () => number = Math.random): number | null {
  if (!Number.isInteger(attemptNumber) || attemptNumber < 1) {
    throw new RangeError(`attemptNumber must be an integer >= 1, got ${attemptNumber}`);
  }
  const delay = delays[attemptNumber - 1];
  if (delay === undefined) return null;
  // Clamped so a misbehaving random source can neither shorten the delay nor exceed +10%.
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.floor(delay * (1 + r * RETRY_JITTER_FRACTION));
}
