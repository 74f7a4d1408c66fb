import type { Logger } from "./logger.js";

export type ShutdownTask = { name: string; run: () => Promise<unknown> };

/**
 * Registers SIGTERM/SIGINT handlers that run `tasks` in order (stop accepting work first, close
 * stores last), each failure logged, and exit 0; or exit 1 if `deadlineMs` passes first.
 * Returns the function, so `main.ts` can also call it on a fatal start-up error.
 */
export function registerShutdown(logger: Logger, tasks: ShutdownTask[], deadlineMs = 10_000): (reason: string) => Promise<void> {
  let started = false;
  const shutdown = async (reason: string) => {
    if (started) return;
    started = true;
    logger.info({ reason }, "shutting down");
    const deadline = setTimeout(() => {
      logger.error({ deadlineMs }, "shutdown deadline passed; exiting");
      process.exit(1);
    }, deadlineMs);
    deadline.unref();
    for (const task of tasks) {
      try {
        await task.run();
      } catch (err) {
        logger.warn({ err, task: task.name }, "shutdown task failed");
      }
    }
    logger.info("stopped");
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  return shutdown;
}
