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
    let current = "";
    const deadline = setTimeout(() => {
      // Names the task still running, so an operator knows what did not let go.
      logger.error({ deadlineMs, task: current }, "shutdown deadline passed; exiting");
      process.exit(1);
    }, deadlineMs);
    deadline.unref();
    for (const task of tasks) {
      current = task.name;
      const started = Date.now();
      try {
        await task.run();
        logger.debug({ task: task.name, ms: Date.now() - started }, "shutdown task done");
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
