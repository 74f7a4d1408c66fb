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

/** What a truthy value of `T` can be: what {@link eventually} resolves with. */
export type Truthy<T> = Exclude<T, null | undefined | false | 0 | "">;

/** Thrown by {@link eventually} when its condition never held. */
export class EventuallyTimeoutError extends Error {
  constructor(description: string, timeoutMs: number, last: unknown) {
    const detail = last instanceof Error ? `; last check threw: ${last.message}` : last === undefined ? "" : `; last check returned ${JSON.stringify(last)}`;
    super(`never happened within ${timeoutMs} ms: ${description}${detail}`);
    this.name = "EventuallyTimeoutError";
  }
}

/**
 * Thrown by a check of {@link eventually} to stop waiting at once: what it waits for can no longer
 * happen (the process that should answer has exited, say). `eventually` rethrows it as it is.
 */
export class GiveUp extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GiveUp";
  }
}

/**
 * Resolves with the first truthy value `check` returns (a check that throws counts as not yet,
 * except with a {@link GiveUp}, which is rethrown at once), or rejects with an
 * {@link EventuallyTimeoutError} naming `description` after `timeoutMs`.
 *
 * @param description what should happen, as the failure message will say it ("every delivery arrived")
 * @param check returns a truthy value once it happened
 */
export async function eventually<T>(description: string, check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Truthy<T>> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const intervalMs = options.intervalMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as Truthy<T>;
      last = value;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      last = err;
    }
    const left = deadline - Date.now();
    if (left <= 0) throw new EventuallyTimeoutError(description, timeoutMs, last);
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, left)));
  }
}
