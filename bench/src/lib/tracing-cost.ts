/**
 * `BENCH_TRACING=1 pnpm bench delivery`: what OpenTelemetry tracing costs the delivery pipeline.
 * Two pairs of event-ingest and delivery-worker run side by side on the same PostgreSQL, Redis
 * (each pair under its own key prefix) and receiver: one with tracing off, one exporting every
 * span (OTEL_TRACES_SAMPLER=always_on, `http/protobuf`) to an OTLP/HTTP receiver this benchmark
 * starts. End-to-end bursts alternate between the two pairs BENCH_ROUNDS times (which goes first
 * alternating too), and the median of each round's ratio is judged: tracing on should keep 85% or
 * more of the throughput with it off.
 * BENCH_TRACING_CENSUS=1 decodes the spans instead of only counting their bytes and prints how many
 * of each (service, name, parent's name) one delivery makes and their estimated share of the bytes
 * (the decoding costs this process CPU, so take throughput from a run without it).
 * BENCH_PROFILE_DIR CPU-profiles the four services under `<dir>/<off|on>-<service>/` (written when
 * they are stopped at the end). BENCH_TRACING_SAMPLER replaces `always_on` on the traced pair:
 * `always_off` measures what tracing's machinery costs with no span recorded or exported.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { PrismaClient } from "@vw/db";
import { spawnService, startOtlpReceiver, type ReceivedSpan, type ServiceProcess } from "@vw/testing";
import { generateSecret, type SecretBox } from "@vw/webhook-core";
import { metricValues, postBurst, receiverReached, resetReceiver, startReceiver } from "./bench-kit.js";
import { GoalTally } from "./goals.js";
import { serviceDir } from "./services.js";

/** What the delivery benchmark hands over. */
export interface TracingCostOptions {
  prisma: PrismaClient;
  databaseUrl: string;
  redisUrl: string;
  keyPrefix: string;
  secretsKey: string;
  box: SecretBox;
  ingestToken: string;
  concurrency: number;
  deliveries: number;
  endpoints: number;
  batch: number;
  posters: number;
  rounds: number;
  log: (line: string) => void;
}

interface Pair {
  name: string;
  ingest: ServiceProcess;
  worker: ServiceProcess;
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Runs the comparison; returns the goal tally (its summary is the last line printed). */
export async function tracingCost(o: TracingCostOptions): Promise<GoalTally> {
  const goals = new GoalTally();
  const receiver = await startReceiver();
  // A sink: it answers like a collector and counts, without decoding (that CPU is not ours to measure).
  const census = process.env.BENCH_TRACING_CENSUS === "1";
  const otlp = await startOtlpReceiver({ decode: census });
  const profileDir = process.env.BENCH_PROFILE_DIR;
  const nodeArgs = (name: string): string[] => (profileDir ? ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, name)}`] : []);
  const processes: ServiceProcess[] = [];
  try {
    const spawnPair = async (name: string, prefix: string, env: Record<string, string>): Promise<Pair> => {
      const side = prefix.endsWith("-on") ? "on" : "off";
      const common = { DATABASE_URL: o.databaseUrl, REDIS_URL: o.redisUrl, REDIS_KEY_PREFIX: prefix, LOG_LEVEL: "warn", SECRETS_ENCRYPTION_KEY: o.secretsKey, ...env };
      const ingest = await spawnService(serviceDir("event-ingest"), { ...common, INGEST_TOKEN: o.ingestToken }, { nodeArgs: nodeArgs(`${side}-ingest`) });
      processes.push(ingest);
      const worker = await spawnService(
        serviceDir("delivery-worker"),
        { ...common, ENDPOINT_URL_POLICY: "any", DELIVERY_CONCURRENCY: String(o.concurrency) },
        { nodeArgs: nodeArgs(`${side}-worker`) },
      );
      processes.push(worker);
      return { name, ingest, worker };
    };
    const off = await spawnPair("tracing off", `${o.keyPrefix}-off`, {});
    const on = await spawnPair("tracing on", `${o.keyPrefix}-on`, {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_TRACES_SAMPLER: process.env.BENCH_TRACING_SAMPLER ?? "always_on",
    });
    const organization = await o.prisma.organization.create({ data: { slug: `bench-otel-${randomBytes(4).toString("hex")}`, name: "Bench" } });

    let tracedDeliveries = 0;
    const run = async (pair: Pair, deliveries: number) => {
      const world = await o.prisma.world.create({ data: { organizationId: organization.id, slug: `w-${randomBytes(4).toString("hex")}`, name: "Bench", adminEmails: [] } });
      for (let i = 0; i < o.endpoints; i += 1) {
        await o.prisma.webhookEndpoint.create({
          data: { worldId: world.id, url: `${receiver.origin}/ok/${i}`, subscriptions: ["visitor"], format: "current", apiVersion: "2026-11-01", secretSealed: o.box.seal(generateSecret()) },
        });
      }
      await resetReceiver(receiver.origin);
      const events = Math.ceil(deliveries / o.endpoints);
      const expected = events * o.endpoints;
      const [workerBefore, ingestBefore] = await Promise.all([metricValues(pair.worker, ["process_cpu_seconds_total"]), metricValues(pair.ingest, ["process_cpu_seconds_total"])]);
      const exportsBefore = otlp.requests["http/protobuf"];
      const bytesBefore = otlp.bytes.total;
      const start = Date.now();
      await postBurst(pair.ingest.url, o.ingestToken, `${organization.slug}/${world.slug}`, events, o.batch, o.posters);
      const s = await receiverReached(receiver.origin, expected);
      const seconds = (s.lastAt - start) / 1000;
      if (pair === on) tracedDeliveries += expected;
      const [workerAfter, ingestAfter] = await Promise.all([metricValues(pair.worker, ["process_cpu_seconds_total"]), metricValues(pair.ingest, ["process_cpu_seconds_total"])]);
      return {
        rate: expected / seconds,
        p99: s.p99,
        workerCpuMs: ((workerAfter[0]! - workerBefore[0]!) * 1000) / expected,
        ingestCpuMs: ((ingestAfter[0]! - ingestBefore[0]!) * 1000) / expected,
        exports: otlp.requests["http/protobuf"] - exportsBefore,
        kbPerDelivery: (otlp.bytes.total - bytesBefore) / 1024 / expected,
      };
    };

    o.log(
      `delivery benchmark, tracing's cost: concurrency ${o.concurrency}, ${o.deliveries} deliveries per run, ${o.endpoints} endpoints, ` +
        `events in batches of ${o.batch} from ${o.posters} posters; tracing on = every span sampled, exported over OTLP/HTTP (protobuf) to a local receiver; Node ${process.version}`,
    );
    // Warm-up of both pairs: JIT, pools, prepared statements.
    await run(off, 2000);
    await run(on, 2000);
    const runs: Record<"off" | "on", Awaited<ReturnType<typeof run>>[]> = { off: [], on: [] };
    for (let round = 0; round < o.rounds; round += 1) {
      // Alternating, and which goes first alternates too: the machine's noise falls on both.
      const order: ["off" | "on", Pair][] = round % 2 === 0 ? [["off", off], ["on", on]] : [["on", on], ["off", off]];
      for (const [key, pair] of order) runs[key].push(await run(pair, o.deliveries));
    }
    const fmt = (n: number): string => n.toFixed(0);
    const report = (key: "off" | "on") => {
      const list = runs[key];
      const rate = median(list.map((r) => r.rate));
      o.log(
        `${key === "off" ? "tracing off" : "tracing on "}: ${fmt(rate)} deliveries/s (median of ${list.length}: ${list.map((r) => fmt(r.rate)).join(", ")}); ` +
          `CPU per delivery (median): worker ${median(list.map((r) => r.workerCpuMs)).toFixed(3)} ms, ingest ${median(list.map((r) => r.ingestCpuMs)).toFixed(3)} ms; ` +
          `lag p99 ${fmt(median(list.map((r) => r.p99)))} ms` +
          (key === "on" ? `; ${median(list.map((r) => r.exports))} OTLP exports per run, ${median(list.map((r) => r.kbPerDelivery)).toFixed(2)} KiB of spans per delivery` : ""),
      );
      return rate;
    };
    const offRate = report("off");
    const onRate = report("on");
    goals.judge(otlp.requests["http/protobuf"] > 0 && otlp.rejected.length === 0);
    o.log(`  spans reached the receiver: ${otlp.requests["http/protobuf"]} exports, ${(otlp.bytes.total / 1024 / 1024).toFixed(1)} MiB (goal: some, none refused)`);
    if (census || profileDir) {
      // A graceful stop flushes the last spans and writes the profiles.
      for (const p of processes.splice(0)) await p.stop();
    }
    if (census) printCensus(otlp.spans, tracedDeliveries, o.log);
    // Judged by the median of each round's ratio: the two bursts of a round ran in the same minute,
    // while one burst moves by a fifth from one minute to the next on a shared machine.
    const ratios = runs.on.map((r, i) => r.rate / runs.off[i]!.rate);
    const ratio = median(ratios);
    goals.judge(ratio >= 0.85);
    o.log(
      `  = ${(ratio * 100).toFixed(1)}% of the throughput with tracing off, the median of each round's ratio ` +
        `(${ratios.map((r) => `${(r * 100).toFixed(1)}%`).join(", ")}; medians of the rates: ${((onRate / offRate) * 100).toFixed(1)}%) (goal >= 85%)`,
    );
    o.log(goals.summary());
    return goals;
  } finally {
    for (const p of processes) await p.kill9();
    receiver.stop();
    await otlp.close();
  }
}

/** Spans per delivery by service, name and parent's name, with their estimated share of the bytes (BENCH_TRACING_CENSUS=1). */
function printCensus(spans: ReceivedSpan[], deliveries: number, log: (line: string) => void): void {
  const rows = new Map<string, { count: number; bytes: number; example: string }>();
  const names = new Map(spans.map((s) => [s.spanId, s.name]));
  let total = 0;
  for (const s of spans) {
    // The size of the span's variable parts as a proxy of its encoded size: ids, name, times, attributes.
    const bytes = 16 + 8 + 8 + 16 + s.name.length + JSON.stringify(s.attributes).length;
    const operation = s.attributes["db.operation.name"];
    const parent = s.parentSpanId === "" ? "(root)" : (names.get(s.parentSpanId) ?? "(parent not received)");
    const key = `${s.service} | ${s.name}${typeof operation === "string" && operation !== s.name ? ` [${operation}]` : ""} < ${parent}`;
    const row = rows.get(key) ?? { count: 0, bytes: 0, example: JSON.stringify(s.attributes) };
    row.count += 1;
    row.bytes += bytes;
    rows.set(key, row);
    total += bytes;
  }
  log(`span census: ${spans.length} spans for ${deliveries} deliveries (${(spans.length / deliveries).toFixed(2)} per delivery)`);
  for (const [key, row] of [...rows].sort((a, b) => b[1].count - a[1].count)) {
    log(`  ${(row.count / deliveries).toFixed(3).padStart(7)} per delivery, ${((row.bytes / total) * 100).toFixed(1).padStart(5)}% of the bytes  ${key}`);
    if (row.count / deliveries >= 0.01) log(`          e.g. ${row.example.slice(0, 400)}`);
  }
}
