/**
 * Pieces shared by the delivery benchmarks (`delivery`, `backlog`, `history`): the receiver process,
 * a private Redis for counting commands, posting events to event-ingest in a burst (closed loop)
 * or at a steady rate (open loop), and quantiles.
 */
import { spawn } from "node:child_process";
import http from "node:http";
import { readdirSync, readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { freePort } from "@vw/testing";

const here = dirname(fileURLToPath(import.meta.url));

/** What `receiver.mjs` counted since its last reset. */
export interface ReceiverStats {
  count: number;
  p50: number;
  p99: number;
  /** The largest lag. */
  max: number;
  /** How many seconds (of arrival) saw a delivery more than 1 s late: a stall, or late all along. */
  lateSeconds: number;
  firstAt: number;
  lastAt: number;
  /** Requests answered on `/slow/...` (a second each). */
  slow: number;
  /** `/slow/...` requests received and not answered yet (not reset by `/_reset`). */
  slowInFlight: number;
  /** `/limited/...` requests answered 200, answered 429, and the most held at once. */
  limitedOk: number;
  limited429: number;
  limitedMost: number;
  /** The receiver process's CPU time since it started, in ms. */
  cpuMs: number;
}

/** Starts `receiver.mjs` in its own process (its CPU is not the benchmark's). */
export async function startReceiver(): Promise<{ origin: string; stop: () => void }> {
  const child = spawn(process.execPath, [join(here, "receiver.mjs")], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => child.stdout!.once("data", (d: Buffer) => resolve(JSON.parse(d.toString()).port)));
  return { origin: `http://127.0.0.1:${port}`, stop: () => child.kill("SIGKILL") };
}

export async function receiverStats(origin: string): Promise<ReceiverStats> {
  return (await (await fetch(`${origin}/_stats`)).json()) as ReceiverStats;
}

export async function resetReceiver(origin: string): Promise<void> {
  await fetch(`${origin}/_reset`, { method: "POST" });
}

/** Resolves once the receiver has counted `expected` `/ok` requests (polling its count, then its stats once). */
export async function receiverReached(origin: string, expected: number): Promise<ReceiverStats> {
  while (Number(await (await fetch(`${origin}/_count`)).text()) < expected) await new Promise((r) => setTimeout(r, 100));
  return receiverStats(origin);
}

/** Deletes every key under `prefix` (a benchmark's own keys, at its end), on any topology. */
export { deleteKeysUnder } from "./redis-target.js";

/**
 * A Redis of the benchmark's own on a free port (no persistence), so `INFO commandstats` counts
 * only this run's commands: the shared Redis serves other people's tests meanwhile.
 */
export async function startPrivateRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on("error", () => undefined); // refused until the server listens: retried below
  for (let i = 0; ; i += 1) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (err) {
      if (i > 50) throw new Error(`private redis-server did not start: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  probe.disconnect();
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGKILL");
      }),
  };
}

/** Commands Redis has executed so far, per command, and their time (`calls` and `usec` in `INFO commandstats`; commands run by scripts included). */
export async function commandCalls(redis: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const info = await redis.info("commandstats");
  const calls = new Map<string, { calls: number; usec: number }>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) calls.set(match[1] as string, { calls: Number(match[2]), usec: Number(match[3]) });
  return calls;
}

/**
 * Commands executed between two {@link commandCalls} snapshots: the total, each command's calls,
 * and each command's time in Redis (µs; a script's own entry, `evalsha`, includes the time of the
 * commands it calls, which have entries of their own).
 */
export function commandDelta(
  before: Map<string, { calls: number; usec: number }>,
  after: Map<string, { calls: number; usec: number }>,
): { total: number; all: [string, number][]; usec: [string, number][] } {
  const delta = [...after].map(([name, n]) => ({ name, calls: n.calls - (before.get(name)?.calls ?? 0), usec: n.usec - (before.get(name)?.usec ?? 0) }));
  return {
    total: delta.reduce((sum, d) => sum + d.calls, 0),
    all: delta.filter((d) => d.calls > 0).map((d) => [d.name, d.calls]),
    usec: delta.filter((d) => d.calls > 0).map((d) => [d.name, d.usec]),
  };
}

/** `visitor.registered` events for a world, their timestamp set when posted. */
export function visitorEvents(world: string, count: number): { id: string; world: string; type: string; timestamp: string; data: unknown }[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `evt-${i}-${randomUUID()}`,
    world,
    type: "visitor.registered",
    timestamp: "",
    data: { uuid: randomUUID(), name: "Bench Visitor", email: "visitor@example.com", via: "email" },
  }));
}

/**
 * The producers' connections: kept alive, as many as the open loops hold requests outstanding.
 * node:http rather than `fetch`, whose WHATWG streams cost the posting process several times the
 * CPU per request: on two cores, what the load generator burns is taken from the pipeline measured.
 */
const producerAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/**
 * One HTTP request over `agent` (kept alive: a benchmark's client should cost little beside what it
 * measures); resolves with the status and the answer's text. `headers` go as given.
 */
export function httpRequest(agent: http.Agent, method: string, url: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** 503 answers from ingest that were retried (a loaded machine's storage timeouts), for the report. */
export const ingestRetries = { count: 0 };

/**
 * POSTs one batch of events to event-ingest, stamping them with the current time. A 503 is
 * retried as a producer would (same ids: ingest deduplicates), up to 10 times, at most 2 s apart:
 * a machine crowded enough to make Redis miss ingest's 5 s bound is a slow run, not a failed one.
 */
export async function postEvents(ingestUrl: string, token: string, events: { timestamp: string }[]): Promise<void> {
  const now = new Date().toISOString();
  for (const e of events) e.timestamp = now;
  for (let attempt = 0; ; attempt += 1) {
    const body = JSON.stringify({ events });
    const res = await httpRequest(producerAgent, "POST", `${ingestUrl}/v1/events`, {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(body)),
    }, body);
    if (res.status === 202) return;
    const text = res.text;
    if (res.status !== 503 || attempt >= 10) throw new Error(`ingest answered ${res.status}: ${text}`);
    ingestRetries.count += 1;
    await new Promise((r) => setTimeout(r, Math.min(2000, 200 * (attempt + 1))));
  }
}

/** Closed loop: `events` in batches of `batch`, from `posters` concurrent posters, as fast as ingest takes them. */
export async function postBurst(ingestUrl: string, token: string, world: string, events: number, batch: number, posters: number): Promise<void> {
  const batches: ReturnType<typeof visitorEvents>[] = [];
  for (let i = 0; i < events; i += batch) batches.push(visitorEvents(world, Math.min(batch, events - i)));
  let next = 0;
  await Promise.all(
    Array.from({ length: posters }, async () => {
      while (next < batches.length) await postEvents(ingestUrl, token, batches[next++]!);
    }),
  );
}

/**
 * Open loop: events at a steady `eventsPerSecond` for `seconds`, posted every `tickMs` (whatever
 * is due by then, stamped at posting), without waiting for earlier posts unless `maxOutstanding`
 * are still unanswered (then what is due waits for the next tick: intake falling behind shows up
 * in the lag, as it would for a real producer). Returns the events posted and in how many requests.
 */
export async function openLoop(options: {
  ingestUrl: string;
  token: string;
  world: string;
  eventsPerSecond: number;
  seconds: number;
  tickMs?: number;
  maxOutstanding?: number;
}): Promise<{ posted: number; requests: number; maxOutstandingHit: number }> {
  const tickMs = options.tickMs ?? 20;
  const maxOutstanding = options.maxOutstanding ?? 8;
  const start = performance.now();
  let posted = 0;
  let requests = 0;
  let outstanding = 0;
  let hit = 0;
  const inFlight = new Set<Promise<void>>();
  for (;;) {
    const elapsed = (performance.now() - start) / 1000;
    if (elapsed >= options.seconds) break;
    const due = Math.floor(elapsed * options.eventsPerSecond) - posted;
    if (due > 0 && outstanding < maxOutstanding) {
      const count = Math.min(due, 500);
      posted += count;
      requests += 1;
      outstanding += 1;
      const p = postEvents(options.ingestUrl, options.token, visitorEvents(options.world, count)).finally(() => {
        outstanding -= 1;
        inFlight.delete(p);
      });
      inFlight.add(p);
    } else if (due > 0) {
      hit += 1;
    }
    await new Promise((r) => setTimeout(r, tickMs));
  }
  await Promise.all(inFlight);
  return { posted, requests, maxOutstandingHit: hit };
}

/**
 * Open loop over many worlds: `eventsPerSecond` events, one per request, each to a world drawn at
 * random from `worlds`, for `seconds`; a request waits for none before it, unless `maxOutstanding`
 * are unanswered (then what is due waits for the next tick, and the lag shows it).
 */
export async function openLoopWorlds(options: {
  ingestUrl: string;
  token: string;
  worlds: readonly string[];
  eventsPerSecond: number;
  seconds: number;
  tickMs?: number;
  maxOutstanding?: number;
}): Promise<{ posted: number; requests: number; maxOutstandingHit: number }> {
  const tickMs = options.tickMs ?? 10;
  const maxOutstanding = options.maxOutstanding ?? 256;
  const start = performance.now();
  let posted = 0;
  let outstanding = 0;
  let hit = 0;
  const inFlight = new Set<Promise<void>>();
  for (;;) {
    const elapsed = (performance.now() - start) / 1000;
    if (elapsed >= options.seconds) break;
    let due = Math.floor(elapsed * options.eventsPerSecond) - posted;
    for (; due > 0 && outstanding < maxOutstanding; due -= 1) {
      posted += 1;
      outstanding += 1;
      const world = options.worlds[Math.floor(Math.random() * options.worlds.length)] as string;
      const p = postEvents(options.ingestUrl, options.token, visitorEvents(world, 1)).finally(() => {
        outstanding -= 1;
        inFlight.delete(p);
      });
      inFlight.add(p);
    }
    if (due > 0) hit += 1;
    await new Promise((r) => setTimeout(r, tickMs));
  }
  await Promise.all(inFlight);
  return { posted, requests: posted, maxOutstandingHit: hit };
}

/**
 * CPU seconds so far of one database's PostgreSQL backends and of the server's own background
 * processes (WAL writer, checkpointer, background writer), by pid: the other databases' backends
 * (other people's tests on a shared machine) are left out.
 */
export function postgresCpuOf(database: string): Map<number, number> {
  const all = postgresCpuSeconds();
  const mine = new Map<number, number>();
  for (const [pid, seconds] of all) {
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
    } catch {
      continue;
    }
    if (cmdline.includes(` ${database} `) || /walwriter|checkpointer|background writer/.test(cmdline)) mine.set(pid, seconds);
  }
  return mine;
}

/** Spread of repeated figures: "min-max (median)". */
export function spread(values: number[], digits = 0): string {
  const sorted = [...values].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] as number;
  return `${(sorted[0] as number).toFixed(digits)}-${(sorted[sorted.length - 1] as number).toFixed(digits)} (median ${median.toFixed(digits)})`;
}

/**
 * CPU seconds used so far by each live PostgreSQL process of this machine (Linux `/proc`, at
 * USER_HZ 100), by pid; empty where there is no `/proc` (the figure is then left out). A backend
 * that exits between two readings is not counted, so a difference is a lower bound.
 */
export function postgresCpuSeconds(): Map<number, number> {
  const byPid = new Map<number, number>();
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return byPid;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      if (!stat.slice(stat.indexOf("(") + 1, close).startsWith("postgres")) continue;
      const fields = stat.slice(close + 2).split(" ");
      byPid.set(Number(pid), (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      // gone meanwhile
    }
  }
  return byPid;
}

/** CPU seconds PostgreSQL used between two {@link postgresCpuSeconds} readings (a process new since `before` counts whole). */
export function postgresCpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0);
  return sum;
}

/** What {@link backendPids} and {@link databaseCounters} query: a client of the stack's own database. */
interface RawQuerying {
  $queryRawUnsafe<T = unknown>(query: string): Promise<T>;
}

/** The pids of the PostgreSQL backends connected to the client's database. */
export async function backendPids(db: RawQuerying): Promise<Set<number>> {
  const rows = await db.$queryRawUnsafe<{ pid: number }[]>("SELECT pid FROM pg_stat_activity WHERE datname = current_database()");
  return new Set(rows.map((r) => Number(r.pid)));
}

/**
 * CPU seconds one database's PostgreSQL backends used between two {@link postgresCpuSeconds}
 * readings: each backend of `pids` (read at the end), less what it had used at the start. A backend
 * that exited meanwhile is not counted, so this is a lower bound; the server's shared processes
 * (WAL writer, checkpointer) are no database's, and neither are other databases' backends.
 */
export function postgresBackendsBetween(pids: ReadonlySet<number>, before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const pid of pids) if (after.has(pid)) sum += after.get(pid)! - (before.get(pid) ?? 0);
  return sum;
}

/** One database's counters so far (`pg_stat_database`, fed by each backend within a second of going idle; `pg_database_size`). */
export interface DatabaseCounters {
  commits: number;
  inserted: number;
  updated: number;
  bytes: number;
}

/** {@link DatabaseCounters} of the client's database: that database alone, whatever else the server runs. */
export async function databaseCounters(db: RawQuerying): Promise<DatabaseCounters> {
  const [row] = await db.$queryRawUnsafe<{ commits: bigint; inserted: bigint; updated: bigint; bytes: bigint }[]>(
    "SELECT xact_commit AS commits, tup_inserted AS inserted, tup_updated AS updated, pg_database_size(datname) AS bytes FROM pg_stat_database WHERE datname = current_database()",
  );
  return { commits: Number(row!.commits), inserted: Number(row!.inserted), updated: Number(row!.updated), bytes: Number(row!.bytes) };
}

/** CPU seconds the Redis server has used so far (`INFO cpu`: user + system). */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const field = (name: string): number => Number(new RegExp(`^${name}:(\\S+)`, "m").exec(info)?.[1] ?? 0);
  return field("used_cpu_user") + field("used_cpu_sys");
}

/** The value of an unlabelled metric on a service's `/metrics` (0 if absent), e.g. `process_cpu_seconds_total`. */
export async function metricValue(service: { url: string }, name: string): Promise<number> {
  return (await metricValues(service, [name]))[0] as number;
}

/**
 * The values of several metrics, read from one scrape of a service's `/metrics` (0 if absent): a
 * name alone, or with its labels as the exposition writes them (`vw_x_total{reason="sweep"}`).
 */
export async function metricValues(service: { url: string }, names: readonly string[]): Promise<number[]> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return names.map((name) => Number(new RegExp(`^${literal(name)} (\\S+)$`, "m").exec(text)?.[1] ?? 0));
}

/** Where a thread's time went so far: seconds on a core, seconds ready to run but waiting for one. */
export interface ThreadTime {
  ranS: number;
  waitedS: number;
  atS: number;
}

/**
 * A process's main thread (its JavaScript) so far, from Linux's `/proc/<pid>/task/<pid>/schedstat`;
 * null where there is none (the figure is then left out).
 */
export function mainThreadTime(pid: number | undefined): ThreadTime | null {
  if (pid === undefined) return null;
  try {
    const [ran, waited] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").trim().split(/\s+/).map(Number);
    return { ranS: ran! / 1e9, waitedS: waited! / 1e9, atS: performance.now() / 1000 };
  } catch {
    return null;
  }
}

/** The shares of the wall time between two readings that a thread ran, and waited for a core. */
export interface ThreadShares {
  ran: number;
  waited: number;
}

/** {@link ThreadShares} between two readings; null when either is missing. */
export function threadShares(before: ThreadTime | null, after: ThreadTime | null): ThreadShares | null {
  if (before === null || after === null || after.atS <= before.atS) return null;
  const wall = after.atS - before.atS;
  return { ran: (after.ranS - before.ranS) / wall, waited: (after.waitedS - before.waitedS) / wall };
}
