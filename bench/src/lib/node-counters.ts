/**
 * Redis work counted over several nodes (the primaries of a Cluster, or one standalone Redis): the
 * commands the platform sent between two `INFO commandstats` readings of each node, their sum, and
 * how evenly the nodes shared them. Pure functions over the readings of `commandCalls`.
 */

/** What `commandCalls` (bench-kit) reads from one node: calls and µs per command. */
export type CommandReading = Map<string, { calls: number; usec: number }>;

/**
 * Commands a benchmark sends itself to read a node (its statistics, its liveness): not the
 * platform's work, so left out of every count.
 */
export const POLLING_COMMANDS: ReadonlySet<string> = new Set(["info", "ping"]);

/** The platform's commands on one node between two readings, per command (polling left out; only those called). */
export function platformCommands(before: CommandReading, after: CommandReading): Map<string, number> {
  const delta = new Map<string, number>();
  for (const [name, now] of after) {
    if (POLLING_COMMANDS.has(name)) continue;
    const calls = now.calls - (before.get(name)?.calls ?? 0);
    if (calls > 0) delta.set(name, calls);
  }
  return delta;
}

/** The total of a per-command map. */
export function total(counts: ReadonlyMap<string, number>): number {
  let sum = 0;
  for (const n of counts.values()) sum += n;
  return sum;
}

/** Per-command maps added together (the nodes of a Cluster, or the units of a run). */
export function addCounts(maps: readonly ReadonlyMap<string, number>[]): Map<string, number> {
  const sum = new Map<string, number>();
  for (const m of maps) for (const [name, n] of m) sum.set(name, (sum.get(name) ?? 0) + n);
  return sum;
}

/**
 * Each node's share of the commands all of them served, and the busiest node's share: 1 / nodes
 * when the work is spread evenly, 1 when one node serves it all (and when there is no work).
 */
export function nodeShares(perNode: readonly number[]): { shares: number[]; busiest: number } {
  const all = perNode.reduce((a, b) => a + b, 0);
  if (all <= 0) return { shares: perNode.map(() => 0), busiest: 1 };
  const shares = perNode.map((n) => n / all);
  return { shares, busiest: Math.max(...shares) };
}
