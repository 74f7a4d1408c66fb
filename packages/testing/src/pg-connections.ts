/**
 * The PostgreSQL connections one process holds, as PostgreSQL sees them: for the tests that hold a
 * spawned service to its connection budget (DATABASE_POOL_MAX, plus a LISTEN connection) and check
 * that every connection carries its `application_name`. The process's TCP connections to the
 * server's port are read from Linux's /proc (its socket inodes, matched in /proc/<pid>/net/tcp and
 * tcp6), and their local ports matched with `client_port` in `pg_stat_activity`; so another
 * process of the run with the same `application_name` (a service spawned by another test file) is
 * never counted.
 */
import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import type pg from "pg";

/** Local ports of the TCP connections `pid` holds to `remotePort` (any address). Linux only. */
export function localPortsTo(pid: number, remotePort: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of safe(() => readdirSync(`/proc/${pid}/fd`), [] as string[])) {
    const link = safe(() => readlinkSync(`/proc/${pid}/fd/${fd}`), "");
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
    if (inode) inodes.add(inode);
  }
  const ports = new Set<number>();
  for (const table of ["tcp", "tcp6"]) {
    for (const line of safe(() => readFileSync(`/proc/${pid}/net/${table}`, "utf8"), "").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const [local, remote, state, inode] = [fields[1] as string, fields[2] as string, fields[3] as string, fields[9] as string];
      // 01: ESTABLISHED
      if (state !== "01" || !inodes.has(inode)) continue;
      if (parseInt(remote.split(":")[1] as string, 16) !== remotePort) continue;
      ports.add(parseInt(local.split(":")[1] as string, 16));
    }
  }
  return ports;
}

function safe<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback; // the process ended, or a descriptor closed while listed
  }
}

/** One look at a process's connections. */
export interface ConnectionSample {
  /** Its connections PostgreSQL lists (`pg_stat_activity` rows whose client port is one of its sockets). */
  connections: number;
  /** Their `application_name`s, one per connection. */
  applicationNames: string[];
}

/** The connections of `pid` to the server `observer` is connected to (`pgPort`: the server's port as the process reaches it). */
export async function sampleConnections(observer: pg.Pool | pg.Client, pid: number, pgPort: number): Promise<ConnectionSample> {
  const ports = [...localPortsTo(pid, pgPort)];
  if (ports.length === 0) return { connections: 0, applicationNames: [] };
  const { rows } = await observer.query<{ application_name: string }>(
    "SELECT application_name FROM pg_stat_activity WHERE client_port = ANY($1::int[]) AND backend_type = 'client backend'",
    [ports],
  );
  return { connections: rows.length, applicationNames: rows.map((r) => r.application_name) };
}

/**
 * Samples the connections of `pid` every `intervalMs` until `stop()`, which resolves with the
 * largest count seen, the number of samples, and every `application_name` seen.
 */
export function watchConnections(observer: pg.Pool | pg.Client, pid: number, pgPort: number, intervalMs = 20): { stop(): Promise<{ max: number; samples: number; applicationNames: Set<string> }> } {
  let stopped = false;
  let max = 0;
  let samples = 0;
  const names = new Set<string>();
  const loop = (async () => {
    while (!stopped) {
      const sample = await sampleConnections(observer, pid, pgPort);
      samples += 1;
      max = Math.max(max, sample.connections);
      for (const name of sample.applicationNames) names.add(name);
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { max, samples, applicationNames: names };
    },
  };
}
