/**
 * The metrics part: the queues' job counts and the backlog from PostgreSQL, read at each scrape
 * (`WorkerMetrics.watchQueues`), and the slowed-endpoints gauge, kept current between drains (it
 * counts the windows used within the last minute). Started last, over every queue of the process.
 */
import type { Queue } from "bullmq";
import type { DeliveryLog } from "@vw/db";
import { backlogOf, type WorkerMetrics } from "./metrics.js";
import type { Part } from "./part.js";
import type { EndpointWindows } from "./windows.js";

/** How often the slowed-endpoints gauge is refreshed. */
const GAUGE_REFRESH_MS = 10_000;

/** Starts watching the queues and refreshing the gauge. */
export function startMetricsWatch(options: { metrics: WorkerMetrics; queues: readonly Queue[]; log: Pick<DeliveryLog, "dueEndpoints">; windows: EndpointWindows }): Part {
  options.metrics.watchQueues(options.queues, async () => backlogOf(await options.log.dueEndpoints(), Date.now()));
  const gaugeTimer = setInterval(() => options.windows.refreshGauge(), GAUGE_REFRESH_MS);
  gaugeTimer.unref();
  return {
    name: "metrics",
    async close() {
      clearInterval(gaugeTimer);
    },
  };
}
