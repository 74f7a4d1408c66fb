/**
 * Waiting on a condition instead of a sleep: `eventually` asks `check` until it holds or the time
 * is up, and then fails with what never happened, so a test that times out says why.
 */

/** Options of {@link eventually}. */
export interface EventuallyOptions {
  /** How long the condition has to come true (default 20 s). */
  timeoutMs?: number;
  /** Pause between two checks (default 50 ms). */
  intervalMs?: number;
}

/** Thrown by {@link eventually} when its condition never held. */
export class EventuallyTimeoutError extends Error {
  constructor(description: string, timeoutMs: number, last: unknown) {
    const detail = last instanceof Error ? `; last check threw: ${last.message}` : last === undefined ? "" : `; last check returned ${JSON.stringify(last)}`;
    super(`never happened within ${timeoutMs} ms: ${description}${detail}`);
    this.name = "EventuallyTimeoutError";
  }
}

/**
 * Resolves with the first truthy value `check` returns (a check that throws counts as not yet),
 * or rejects with an {@link EventuallyTimeoutError} naming `description` after `timeoutMs`.
 *
 * @param description what should happen, as the failure message will say it ("every delivery arrived")
 * @param check returns a truthy value once it happened
 */
export async function eventually<T>(description: string, check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const intervalMs = options.intervalMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (err) {
      last = err;
    }
    const left = deadline - Date.now();
    if (left <= 0) throw new EventuallyTimeoutError(description, timeoutMs, last);
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, left)));
  }
}
