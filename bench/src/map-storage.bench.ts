/**
 * `pnpm bench map-storage`: GET of a 200 KB WAM through map-storage vs a direct S3 GetObject of the
 * same object on the same S3 server, the 304 revalidation rate, and PATCH throughput on one hot
 * file vs spread over 50 files; then map authors' uploads (see {@link uploadBench}). Baselines are
 * measured in the same run; ratios are what to compare across machines. Expects DATABASE_URL,
 * a Redis topology (REDIS_URL, or REDIS_SENTINELS or REDIS_CLUSTER_NODES: map-storage's keys are
 * single keys) and S3_* in the environment (scripts/bench.mjs).
 */
import { Agent, request } from "node:http";
import { GetObjectCommand } from "@aws-sdk/client-s3";
import { createPrismaClient, generateApiKey } from "@vw/db";
import { randomBytes } from "node:crypto";
import { spawnService } from "@vw/testing";
import { GoalTally } from "./lib/goals.js";
import { benchRedisEnv, benchRedisTopology, deleteKeysUnder } from "./lib/redis-target.js";
import { benchS3 } from "./lib/s3-client.js";
import { serviceDir } from "./lib/services.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RUNTIME_NODE_FLAGS } from "@vw/testing";
import { benchMap, postUpload, rssOf, sampleRss, writeLargeZip, zipOf } from "./lib/upload-kit.js";

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const GETS = Number(process.env.BENCH_GETS ?? 3000);
const PATCHES = Number(process.env.BENCH_PATCHES ?? 600);
const UPLOAD_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const MiB = 1024 * 1024;

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const goals = new GoalTally();

function http(method: string, url: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; bytes: number; etag?: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request({ agent, host: u.hostname, port: u.port, path: u.pathname, method, headers }, (res) => {
      let bytes = 0;
      res.on("data", (c: Buffer) => (bytes += c.length));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes, ...(res.headers.etag ? { etag: res.headers.etag } : {}) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

interface Run {
  ops: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
}

/** Runs `total` operations with `concurrency` in flight; each op's latency is recorded. */
async function measure(total: number, concurrency: number, op: (i: number) => Promise<void>): Promise<Run> {
  const latencies: number[] = [];
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total; i = next++) {
        const t = process.hrtime.bigint();
        await op(i);
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return { ops: total, seconds, perSecond: total / seconds, p50: pct(50), p99: pct(99) };
}

function wam(targetBytes: number): string {
  const entities: Record<string, unknown> = {};
  let i = 0;
  let doc = "";
  while (doc.length < targetBytes) {
    for (let k = 0; k < 200; k++, i++) {
      entities[`entity-${i}`] = { x: i % 640, y: Math.floor(i / 640) * 32, prefabRef: { id: `chair-${i % 17}`, collectionName: "office" }, properties: [{ type: "jitsiRoomProperty", roomName: `room-${i}` }] };
    }
    doc = JSON.stringify({ version: "2.1.0", mapUrl: "https://maps.example.com/office.tmj", entities, areas: [], entityCollections: [], metadata: { name: "Bench" } });
  }
  return doc;
}

const fmt = (r: Run) => `${r.perSecond.toFixed(0).padStart(7)} /s   p50 ${r.p50.toFixed(2)} ms   p99 ${r.p99.toFixed(2)} ms   (${r.ops} ops)`;

async function main() {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error("DATABASE_URL is not set: run it as `pnpm bench map-storage` (scripts/bench.mjs provides it)");
  const redis = benchRedisTopology();
  const prisma = createPrismaClient(databaseUrl);
  const suffix = randomBytes(3).toString("hex");
  const org = await prisma.organization.create({ data: { slug: `bench-${suffix}`, name: "Bench" } });
  const world = await prisma.world.create({ data: { slug: "world", name: "Bench", organizationId: org.id, adminEmails: ["ops@example.com"] } });
  const key = generateApiKey();
  await prisma.apiKey.create({ data: { worldId: world.id, tokenHash: key.tokenHash, tokenPrefix: key.tokenPrefix, name: "bench" } });
  const prefix = `bench:ms:${suffix}:`;
  // MAX_UPLOAD_BYTES raised: the memory goal streams a zip larger than the default 500 MiB.
  const svc = await spawnService(serviceDir("map-storage"), { ...benchRedisEnv(), REDIS_KEY_PREFIX: prefix, LOG_LEVEL: "warn", MAX_UPLOAD_BYTES: String(4096 * MiB) });
  const base = `${svc.url}/${org.slug}/${world.slug}`;
  const auth = { authorization: `Bearer ${key.token}` };

  try {
    const body = wam(200 * 1024);
    const put = await http("PUT", `${base}/rooms/big.wam`, { ...auth, "content-type": "application/json" }, body);
    if (put.status !== 201) throw new Error(`PUT answered ${put.status}`);
    const { client: s3, bucket, endpoint } = benchS3(process.env);
    const objectKey = `${org.slug}/${world.slug}/rooms/big.wam`;
    const direct = async () => {
      const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: objectKey }));
      const bytes = await out.Body!.transformToByteArray();
      if (bytes.length !== Buffer.byteLength(body)) throw new Error("short read");
    };
    const viaService = async () => {
      const r = await http("GET", `${base}/rooms/big.wam`);
      if (r.status !== 200 || r.bytes !== Buffer.byteLength(body)) throw new Error(`GET answered ${r.status} with ${r.bytes} bytes`);
    };
    const etag = put.etag!;
    const revalidate = async () => {
      const r = await http("GET", `${base}/rooms/big.wam`, { "if-none-match": etag });
      if (r.status !== 304) throw new Error(`revalidation answered ${r.status}`);
    };

    process.stdout.write(`map-storage benchmark: ${(Buffer.byteLength(body) / 1024).toFixed(0)} KB WAM, concurrency ${CONCURRENCY}, S3 at ${endpoint ?? "AWS"}\n`);
    // Warm-up: sockets, JIT, the service's cache.
    await measure(200, CONCURRENCY, direct);
    await measure(200, CONCURRENCY, viaService);

    const s3Run = await measure(GETS, CONCURRENCY, direct);
    const svcRun = await measure(GETS, CONCURRENCY, viaService);
    const revalRun = await measure(GETS * 3, CONCURRENCY, revalidate);

    const small = JSON.stringify({ version: "2.1.0", mapUrl: "https://maps.example.com/m.tmj", entities: {}, areas: [] });
    await http("PUT", `${base}/rooms/hot.wam`, { ...auth, "content-type": "application/json" }, small);
    for (let f = 0; f < 50; f++) await http("PUT", `${base}/rooms/cold-${f}.wam`, { ...auth }, small);
    const patchHeaders = { ...auth, "content-type": "application/json-patch+json" };
    const patchOp = (path: string, i: number) => async () => {
      const r = await http("PATCH", `${base}/${path}`, patchHeaders, JSON.stringify([{ op: "add", path: `/entities/e${i}`, value: { x: i } }]));
      if (r.status !== 200) throw new Error(`PATCH answered ${r.status}`);
    };
    const hotRun = await measure(PATCHES, CONCURRENCY, (i) => patchOp("rooms/hot.wam", i)());
    const spreadRun = await measure(PATCHES, CONCURRENCY, (i) => patchOp(`rooms/cold-${i % 50}.wam`, i)());

    // The goal: a read through the service at least as fast as reading S3 directly (hot rooms are
    // served from memory that every write invalidates, across instances).
    const serviceRatio = svcRun.perSecond / s3Run.perSecond;
    goals.judge(serviceRatio >= 1);
    const lines = [
      "",
      `GET 200 KB WAM, direct S3 GetObject (baseline) ${fmt(s3Run)}`,
      `GET 200 KB WAM, through map-storage           ${fmt(svcRun)}`,
      `  ratio service / direct S3: ${serviceRatio.toFixed(2)}x throughput, ${(s3Run.p50 / svcRun.p50).toFixed(2)}x faster at p50 (goal >= 1x throughput)`,
      `GET with If-None-Match (304 revalidation)      ${fmt(revalRun)}`,
      `  ratio 304 / direct S3 GET: ${(revalRun.perSecond / s3Run.perSecond).toFixed(2)}x`,
      `PATCH, one hot file                            ${fmt(hotRun)}`,
      `PATCH, spread over 50 files                    ${fmt(spreadRun)}`,
      `  ratio hot / spread: ${(hotRun.perSecond / spreadRun.perSecond).toFixed(2)}`,
    ];
    process.stdout.write(lines.join("\n") + "\n");
    s3.destroy();
    await uploadBench(base, key.token, svc.child.pid!);
    process.stdout.write(`\n${goals.summary()}\n`);
  } finally {
    await svc.stop();
    await deleteKeysUnder(redis, prefix);
    await prisma.organization.delete({ where: { id: org.id } });
    await prisma.$disconnect();
    agent.destroy();
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** V8's young generation at the services' flags: two semi-spaces plus a new large-object space of the same size. */
function youngGenerationBytes(): number {
  const flag = RUNTIME_NODE_FLAGS.find((f) => f.startsWith("--max-semi-space-size="));
  return 3 * Number(flag?.split("=")[1] ?? 16) * MiB;
}

/**
 * Map authors' uploads. (1) A built map of 200 files, 20 MB (random tilesets, JSON maps, WAM rooms)
 * published in one `POST {base}/upload` against the same files PUT one by one with 16 in flight,
 * alternated `BENCH_ROUNDS` times in fresh directories, medians compared; then every uploaded file
 * is read back (GET, 16 in flight) and compared byte for byte. (2) The service's resident memory
 * (`/proc/<pid>/status` VmRSS, sampled every 25 ms) while a zip 10 times the young generation
 * streams through it (spooled to disk, checked, written to S3): its peak against the RSS just
 * before. Returns whether each goal is met.
 */
async function uploadBench(base: string, token: string, pid: number): Promise<void> {
  const files = benchMap(200, 20 * 1000 * 1000);
  const totalBytes = [...files.values()].reduce((n, b) => n + b.length, 0);
  const zip = await zipOf(files);
  const auth = { authorization: `Bearer ${token}` };
  const putAll = async (dir: string) => {
    const list = [...files.entries()];
    const t = process.hrtime.bigint();
    await measure(list.length, CONCURRENCY, async (i) => {
      const [name, data] = list[i]!;
      const r = await http("PUT", `${base}/${dir}/${name}`, auth, data as unknown as string);
      if (r.status !== 201) throw new Error(`PUT ${name} answered ${r.status}`);
    });
    return Number(process.hrtime.bigint() - t) / 1e6;
  };
  const uploadAll = async (dir: string) => {
    const r = await postUpload(`${base}/upload`, token, dir, zip);
    if (r.status !== 200) throw new Error(`upload answered ${r.status}: ${r.body}`);
    return r.ms;
  };
  await uploadAll("warm-upload");
  await putAll("warm-put");
  const puts: number[] = [];
  const uploads: number[] = [];
  for (let round = 0; round < UPLOAD_ROUNDS; round++) {
    // Alternated, so a slow phase of the machine does not land on one side only.
    if (round % 2 === 0) {
      puts.push(await putAll(`put-${round}`));
      uploads.push(await uploadAll(`upload-${round}`));
    } else {
      uploads.push(await uploadAll(`upload-${round}`));
      puts.push(await putAll(`put-${round}`));
    }
  }
  const list = [...files.entries()];
  const served = await measure(list.length, CONCURRENCY, async (i) => {
    const [name, data] = list[i]!;
    const r = await http("GET", `${base}/upload-0/${name}`);
    if (r.status !== 200 || r.bytes !== data.length) throw new Error(`GET ${name} after the upload answered ${r.status} with ${r.bytes} bytes`);
  });
  const ratio = median(uploads) / median(puts);
  const ms = (v: number[]) => v.map((x) => x.toFixed(0)).join(", ");

  // (2) The large zip, written to disk first so the client holds none of it in memory either.
  const young = youngGenerationBytes();
  const entryBytes = 48 * MiB;
  const entries = Math.ceil((10 * young) / entryBytes);
  const dir = await mkdtemp(join(tmpdir(), "vw-bench-zip-"));
  let big: { zipBytes: number; before: number; peak: number; samples: number; seconds: number; tenths: number[] };
  try {
    const zipBytes = await writeLargeZip(join(dir, "big.zip"), entries, entryBytes);
    const before = rssOf(pid) ?? 0;
    const sampler = sampleRss(pid);
    const r = await postUpload(`${base}/upload`, token, "big", { path: join(dir, "big.zip") });
    const { peak, samples, tenths } = sampler.stop();
    if (r.status !== 200) throw new Error(`large upload answered ${r.status}: ${r.body}`);
    big = { zipBytes, before, peak, samples, seconds: r.ms / 1000, tenths };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const growth = big.peak - big.before;

  process.stdout.write(
    [
      "",
      `upload: ${files.size} files, ${(totalBytes / 1e6).toFixed(1)} MB (zip ${(zip.length / 1e6).toFixed(1)} MB), ${UPLOAD_ROUNDS} rounds alternated`,
      `  one POST {base}/upload          median ${median(uploads).toFixed(0)} ms   (${ms(uploads)})`,
      `  PUT one by one, ${CONCURRENCY} in flight   median ${median(puts).toFixed(0)} ms   (${ms(puts)})`,
      `  then served: ${fmt(served)}, every file's length checked`,
      `upload time / one-by-one PUT time: ${ratio.toFixed(2)}x (goal <= 2x)`,
      `large upload: ${(big.zipBytes / MiB).toFixed(0)} MiB zip (${entries} stored entries of ${entryBytes / MiB} MiB) = ${(big.zipBytes / young).toFixed(1)}x the young generation (${young / MiB} MiB), ${big.seconds.toFixed(1)} s`,
      `  service RSS ${(big.before / MiB).toFixed(0)} MiB before, peak ${(big.peak / MiB).toFixed(0)} MiB (${big.samples} samples); peak by tenth of the upload: ${big.tenths.map((b) => (b / MiB).toFixed(0)).join(" ")} MiB`,
      `service RSS growth while it streamed: ${(growth / MiB).toFixed(0)} MiB (goal < ${young / MiB} MiB, one young generation: flat, not growing with the zip)`,
    ].join("\n") + "\n",
  );
  goals.judge(ratio <= 2);
  goals.judge(growth < young);
}

await main();
