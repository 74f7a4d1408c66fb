/**
 * A close that cannot hold the shutdown forever. BullMQ's close can wait longer than any attempt
 * on a blocking connection still backing off after a Redis outage (a known BullMQ behaviour): past
 * the bound it is left behind, named in the log, instead of holding the process until it is killed.
 */
import { withTimeout, type Logger } from "@vw/service-kit";

/** Waits for `closing` at most `ms`; a close that fails for another reason still throws. */
export function closeWithin(logger: Logger, closing: Promise<unknown>, ms: number, what: string): Promise<unknown> {
  return withTimeout(closing, ms, what).catch((err: unknown) => {
    if (!(err instanceof Error && err.message === what)) throw err;
    logger.warn({ closing: what, waitedMs: ms }, "did not close in time (a Redis connection still reconnecting); left behind");
  });
}
