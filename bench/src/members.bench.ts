/**
 * `pnpm bench members`: the member directory's two paths, each against a baseline measured in the
 * same run on the same processes (these 2 shared cores are noisy; ratios compare across runs).
 *
 * 1. Lookup: `GET /api/v1/worlds/{world}/members/{uuid}` on an admin-api process over a directory
 *    of BENCH_MEMBERS people (10,000, four consent answers each), random uuids, sequential calls
 *    (a receiver looks one person up while handling a delivery). Each lookup is paired with a bare
 *    `GET /healthz` on the same server and connection, interleaved, so both see the same machine:
 *    the difference is the key check and the query.
 * 2. Intake: `POST /v1/events` batches of 100 events on an event-ingest process, `consent.changed`
 *    (written to the directory in the ingest transaction) paired with `recording.completed` (names
 *    nobody, so the directory is not touched): the cost the directory adds to event intake.
 *
 * Expects DATABASE_URL and a Redis topology, REDIS_URL by default (scripts/bench.mjs provides them).
 */
import http from "node:http";
import { randomBytes, randomUUID } from "node:crypto";
import { EVENT_SAMPLES } from "@vw/contracts";
import { MemberDirectory, createPgPool, pgRunner, type MemberEvent } from "@vw/db";
import { spawnService, type ServiceProcess } from "@vw/testing";
import { generateSecretBoxKey } from "@vw/webhook-core";
import { httpRequest } from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { benchRedisEnv } from "./lib/redis-target.js";
import { serviceDir } from "./lib/services.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 3000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 300);
const MEMBERS = Number(process.env.BENCH_MEMBERS ?? 10_000);
const BATCHES = Number(process.env.BENCH_BATCHES ?? 100);
const BATCH_SIZE = 100;
const ADMIN_TOKEN = `bench-admin-${randomBytes(12).toString("hex")}`;
const INGEST_TOKEN = `bench-ingest-${randomBytes(12).toString("hex")}`;
const PURPOSES = ["newsletter", "events", "feedback_survey", "third_party"] as const;

const databaseUrl = process.env.DATABASE_URL!;
const log = (line: string) => console.log(line);
const goals = new GoalTally();
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function call(method: string, url: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; text: string }> {
  return httpRequest(agent, method, url, headers, body);
}

async function json(method: string, url: string, token: string, body?: unknown): Promise<any> {
  const res = await call(method, url, { authorization: `Bearer ${token}`, "content-type": "application/json" }, body === undefined ? undefined : JSON.stringify(body));
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${res.text}`);
  return JSON.parse(res.text);
}

/** Milliseconds each call of `op` took. */
async function timed(op: () => Promise<void>): Promise<number> {
  const t = process.hrtime.bigint();
  await op();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const ms = (x: number) => x.toFixed(2);

/** Runs `n` interleaved pairs (a, b) and returns each side's latencies. */
async function pairs(n: number, a: (i: number) => Promise<void>, b: (i: number) => Promise<void>): Promise<{ a: number[]; b: number[] }> {
  const out = { a: [] as number[], b: [] as number[] };
  for (let i = 0; i < n; i++) {
    out.a.push(await timed(() => a(i)));
    out.b.push(await timed(() => b(i)));
  }
  return out;
}

const processes: ServiceProcess[] = [];
const pool = createPgPool(databaseUrl, { max: 4 });
try {
  const prefix = `vw-bench-members-${randomBytes(3).toString("hex")}`;
  const env = { DATABASE_URL: databaseUrl, ...benchRedisEnv(), REDIS_KEY_PREFIX: prefix, SECRETS_ENCRYPTION_KEY: generateSecretBoxKey(), LOG_LEVEL: "warn" };
  const [admin, ingest] = await Promise.all([
    spawnService(serviceDir("admin-api"), { ...env, ADMIN_TOKEN }),
    spawnService(serviceDir("event-ingest"), { ...env, INGEST_TOKEN }),
  ]);
  processes.push(admin, ingest);

  await json("POST", `${admin.url}/admin/v1/organizations`, ADMIN_TOKEN, { slug: "bench", name: "Bench" });
  const world = await json("POST", `${admin.url}/admin/v1/organizations/bench/worlds`, ADMIN_TOKEN, { slug: "hall", name: "Hall", adminEmails: ["ops@example.com"] });
  const key = (await json("POST", `${admin.url}/admin/v1/worlds/bench/hall/api-keys`, ADMIN_TOKEN, { name: "bench" })).token as string;
  const worldId = (await pool.query<{ id: string }>("SELECT w.id FROM worlds w JOIN organizations o ON o.id = w.organization_id WHERE o.slug = 'bench' AND w.slug = $1", [world.slug])).rows[0]!.id;

  // The directory, seeded through its own module in batches (as event-ingest writes it).
  const directory = new MemberDirectory(pgRunner(pool));
  const uuids = Array.from({ length: MEMBERS }, () => randomUUID());
  const seededAt = Date.now() - 3_600_000;
  for (let i = 0; i < uuids.length; i += 500) {
    const events: MemberEvent[] = uuids.slice(i, i + 500).flatMap((uuid, j) => [
      { kind: "visitor-registered", worldId, eventId: `r-${i + j}`, timestamp: new Date(seededAt).toISOString(), uuid, name: `Visitor ${i + j}`, email: `v${i + j}@example.com` },
      ...PURPOSES.map((purpose, k): MemberEvent => ({
        kind: "consent-changed",
        worldId,
        eventId: `c-${i + j}-${k}`,
        timestamp: new Date(seededAt + 1000 + k).toISOString(),
        uuid,
        email: `v${i + j}@example.com`,
        type: "visitor",
        purpose,
        granted: k % 2 === 0,
      })),
    ]);
    await directory.applyEvents(events);
  }

  // 1. Lookup vs /healthz, interleaved, sequential.
  const auth = { authorization: `Bearer ${key}` };
  const lookup = async (i: number) => {
    const res = await call("GET", `${admin.url}/api/v1/worlds/hall/members/${uuids[(i * 7919) % uuids.length]}`, auth);
    if (res.status !== 200) throw new Error(`lookup answered ${res.status}: ${res.text}`);
  };
  const healthz = async () => {
    const res = await call("GET", `${admin.url}/healthz`);
    if (res.status !== 200) throw new Error(`/healthz answered ${res.status}`);
  };
  await pairs(WARMUP, lookup, healthz);
  const look = await pairs(CALLS, lookup, healthz);
  const [l, hz] = [sorted(look.a), sorted(look.b)];

  // 2. Intake: 100 consent.changed (directory) vs 100 recording.completed (no directory) per request.
  const ingestHeaders = { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" };
  const batch = (make: (n: number) => unknown) => JSON.stringify({ events: Array.from({ length: BATCH_SIZE }, (_, n) => make(n)) });
  let seq = 0;
  const now = () => new Date().toISOString();
  const consentBatch = () =>
    batch((n) => ({
      id: randomUUID(),
      world: "bench/hall",
      type: "consent.changed",
      timestamp: now(),
      data: { uuid: uuids[(seq++ * 31 + n) % uuids.length], email: "someone@example.com", type: "visitor", purpose: PURPOSES[n % 4], granted: n % 3 === 0 ? null : n % 2 === 0 },
    }));
  const recordingBatch = () => batch(() => ({ id: randomUUID(), world: "bench/hall", type: "recording.completed", timestamp: now(), data: EVENT_SAMPLES["recording.completed"] }));
  const post = (body: string) => async () => {
    const res = await call("POST", `${ingest.url}/v1/events`, ingestHeaders, body);
    if (res.status !== 202) throw new Error(`intake answered ${res.status}: ${res.text}`);
  };
  const intakeOf = async (n: number) => {
    const out = { a: [] as number[], b: [] as number[] };
    for (let i = 0; i < n; i++) {
      const [c, r] = [consentBatch(), recordingBatch()];
      out.a.push(await timed(post(c)));
      out.b.push(await timed(post(r)));
    }
    return out;
  };
  await intakeOf(10);
  const intake = await intakeOf(BATCHES);
  const [ci, ri] = [sorted(intake.a), sorted(intake.b)];

  log(`member lookup (${MEMBERS} members, ${CALLS} sequential calls, keep-alive):`);
  log(`  GET /api/v1/worlds/{world}/members/{uuid}: p50 ${ms(pct(l, 50))} ms, p99 ${ms(pct(l, 99))} ms`);
  log(`  GET /healthz on the same server (baseline): p50 ${ms(pct(hz, 50))} ms, p99 ${ms(pct(hz, 99))} ms`);
  goals.judge(pct(l, 50) - pct(hz, 50) <= 1);
  log(`  = ${(pct(l, 50) / pct(hz, 50)).toFixed(2)}x the baseline at p50, ${(pct(l, 99) / pct(hz, 99)).toFixed(2)}x at p99; ` +
      `added p50 ${ms(pct(l, 50) - pct(hz, 50))} ms (goal added p50 <= 1 ms)`);
  log(`event intake (${BATCHES} requests of ${BATCH_SIZE} events each, no endpoints):`);
  log(`  consent.changed (member directory written in the transaction): p50 ${ms(pct(ci, 50))} ms, p99 ${ms(pct(ci, 99))} ms`);
  log(`  recording.completed (names nobody, baseline):                  p50 ${ms(pct(ri, 50))} ms, p99 ${ms(pct(ri, 99))} ms`);
  goals.judge(pct(ci, 50) / pct(ri, 50) <= 1.5);
  log(`  = ${(pct(ci, 50) / pct(ri, 50)).toFixed(2)}x the baseline at p50 (goal <= 1.5x)`);
  log(goals.summary());
} finally {
  await Promise.all(processes.map((p) => p.stop()));
  await pool.end();
  agent.destroy();
}
