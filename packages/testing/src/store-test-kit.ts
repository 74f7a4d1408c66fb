/**
 * For the private stores' own tests: the `redis-server` processes this process started that still
 * run (read from /proc), to check that a failed start or a stop leaves none behind.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Pids of running `redis-server` processes whose parent is this process. */
export function ownRedisChildren(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // "pid (comm) state ppid ...": comm may hold spaces, so read after its closing parenthesis.
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (comm === "redis-server" && Number(ppid) === process.pid && state !== "Z") pids.push(Number(entry));
    } catch {
      // the process ended while we read
    }
  }
  return pids;
}
