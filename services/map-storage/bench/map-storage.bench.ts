/**
 * `pnpm bench map-storage`: GET of a 200 KB WAM through map-storage vs a direct S3 GetObject of the
 * same object on the same S3 server, the 304 revalidation rate, and PATCH throughput on one hot
 * file vs spread over 50 files. Baselines are measured in the same run; ratios are what to compare
 * across machines. Expects DATABASE_URL, REDIS_URL and S3_* in the environment (scripts/bench.mjs).
 */
import { Agent, request } from "node:http";
import { GetObjectCommand } from "@aws-sdk/client-s3";
import { createPrismaClient, generateApiKey } from "@vw/db";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { spawnMapStorage } from "../test/processes.js";
import { createS3Client } from "../src/storage/s3-object-store.js";
import { loadConfig } from "../src/config.js";

const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const GETS = Number(process.env.BENCH_GETS ?? 3000);
const PATCHES = Number(process.env.BENCH_PATCHES ?? 600);

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });

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
  const config = loadConfig({ ...process.env, LOG_LEVEL: "silent" });
  if (config.redis.kind !== "standalone") throw new Error("the map-storage benchmark runs on a standalone Redis (REDIS_URL)");
  const redisUrl = config.redis.url;
  const prisma = createPrismaClient(config.databaseUrl);
  const suffix = randomBytes(3).toString("hex");
  const org = await prisma.organization.create({ data: { slug: `bench-${suffix}`, name: "Bench" } });
  const world = await prisma.world.create({ data: { slug: "world", name: "Bench", organizationId: org.id, adminEmails: ["ops@example.com"] } });
  const key = generateApiKey();
  await prisma.apiKey.create({ data: { worldId: world.id, tokenHash: key.tokenHash, tokenPrefix: key.tokenPrefix, name: "bench" } });
  const prefix = `bench:ms:${suffix}:`;
  const svc = await spawnMapStorage({ REDIS_KEY_PREFIX: prefix, LOG_LEVEL: "warn" });
  const base = `${svc.url}/${org.slug}/${world.slug}`;
  const auth = { authorization: `Bearer ${key.token}` };

  try {
    const body = wam(200 * 1024);
    const put = await http("PUT", `${base}/rooms/big.wam`, { ...auth, "content-type": "application/json" }, body);
    if (put.status !== 201) throw new Error(`PUT answered ${put.status}`);
    const s3 = createS3Client(config.s3);
    const objectKey = `${org.slug}/${world.slug}/rooms/big.wam`;
    const direct = async () => {
      const out = await s3.send(new GetObjectCommand({ Bucket: config.s3.bucket, Key: objectKey }));
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

    process.stdout.write(`map-storage benchmark: ${(Buffer.byteLength(body) / 1024).toFixed(0)} KB WAM, concurrency ${CONCURRENCY}, S3 at ${config.s3.endpoint ?? "AWS"}\n`);
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

    const lines = [
      "",
      `GET 200 KB WAM, direct S3 GetObject (baseline) ${fmt(s3Run)}`,
      `GET 200 KB WAM, through map-storage           ${fmt(svcRun)}`,
      `  ratio service / direct S3: ${(svcRun.perSecond / s3Run.perSecond).toFixed(2)}x throughput, ${(s3Run.p50 / svcRun.p50).toFixed(2)}x faster at p50`,
      `GET with If-None-Match (304 revalidation)      ${fmt(revalRun)}`,
      `  ratio 304 / direct S3 GET: ${(revalRun.perSecond / s3Run.perSecond).toFixed(2)}x`,
      `PATCH, one hot file                            ${fmt(hotRun)}`,
      `PATCH, spread over 50 files                    ${fmt(spreadRun)}`,
      `  ratio hot / spread: ${(hotRun.perSecond / spreadRun.perSecond).toFixed(2)}`,
    ];
    process.stdout.write(lines.join("\n") + "\n");
    s3.destroy();
  } finally {
    await svc.stop();
    const redis = new Redis(redisUrl);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await prisma.organization.delete({ where: { id: org.id } });
    await prisma.$disconnect();
    agent.destroy();
  }
}

await main();
