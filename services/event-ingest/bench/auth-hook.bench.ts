/**
 * `pnpm bench auth-hook`: the latency event-ingest adds to `POST /v1/auth-hook` on top of the
 * receivers' own answer time. One event-ingest process (spawned from src, as in production) and
 * one receiver process that answers after a fixed delay (BENCH_RECEIVER_DELAY_MS, 2 ms) and
 * records its own answer time per request. Sequential calls (the hook is on one member's critical
 * path; concurrency would measure queueing instead), for a world with one `auth` endpoint and
 * one with three, in the same run. added = client round trip − Σ receiver answer times of that call.
 * Baseline, same run: the same client POSTing the same body straight to the receiver, so its
 * "added" is what one loopback HTTP hop (client, kernel, receiver's parser) costs on this machine;
 * the hook's added time includes one such hop (client → event-ingest) that no service can remove.
 * The client is node:http with a keep-alive agent (as light as a client gets, so its own cost
 * does not hide the service's). Expects DATABASE_URL and REDIS_URL (scripts/bench.mjs provides them).
 */
import { spawn } from "node:child_process";
import http from "node:http";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createPrismaClient } from "@vw/db";
import { spawnService } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..");
const CALLS = Number(process.env.BENCH_CALLS ?? 2000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 200);
const RECEIVER_DELAY_MS = Number(process.env.BENCH_RECEIVER_DELAY_MS ?? 2);
const INGEST_TOKEN = "bench-ingest-token-0123456789";

const databaseUrl = process.env.DATABASE_URL!;
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);

const quantile = (sorted: readonly number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
const fmt = (ms: number): string => `${ms.toFixed(2)} ms`;
const clientAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** One POST over the keep-alive agent; resolves with the status and the body text. */
function post(url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", agent: clientAgent, headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function startReceiver(): Promise<{ origin: string; stop: () => void }> {
  const child = spawn(process.execPath, [join(here, "hook-receiver.mjs"), String(RECEIVER_DELAY_MS)], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => child.stdout!.once("data", (d: Buffer) => resolve(JSON.parse(d.toString()).port)));
  return { origin: `http://127.0.0.1:${port}`, stop: () => child.kill("SIGKILL") };
}

async function main(): Promise<void> {
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startReceiver();
  const ingest = await spawnService(join(root, "services", "event-ingest"), {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: `vwbench-${randomBytes(4).toString("hex")}`,
    INGEST_TOKEN,
    SECRETS_ENCRYPTION_KEY: secretsKey,
    ENDPOINT_URL_POLICY: "any",
    LOG_LEVEL: "warn",
  }, { nodeArgs: process.env.BENCH_PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [] });
  try {
    const organization = await prisma.organization.create({ data: { slug: `bench-${randomBytes(4).toString("hex")}`, name: "Bench" } });
    const worldWith = async (endpoints: number): Promise<string> => {
      const world = await prisma.world.create({
        data: {
          organizationId: organization.id,
          slug: `w${endpoints}-${randomBytes(3).toString("hex")}`,
          name: "Bench",
          adminEmails: [],
          identityProviders: [{ id: "acme-okta", kind: "openid-connect", exposeAccessToken: true }, { id: "google", kind: "google", exposeAccessToken: false }],
        },
      });
      for (let i = 0; i < endpoints; i += 1) {
        await prisma.webhookEndpoint.create({
          data: { worldId: world.id, url: `${receiver.origin}/hook/${i}`, subscriptions: ["auth"], format: "current", apiVersion: "2026-11-01", secretSealed: box.seal(generateSecret()) },
        });
      }
      return `${organization.slug}/${world.slug}`;
    };

    const call = async (world: string): Promise<number> => {
      const body = JSON.stringify({
        world,
        roomUrl: "https://play.example.test/@/acme/hq/lobby.wam",
        uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b",
        accessTokens: [{ provider: "acme-okta", token: "eyJhbGciOiJSUzI1NiJ9.bench.sig" }, { provider: "google", token: "ya29.bench" }],
      });
      const start = performance.now();
      const res = await post(`${ingest.url}/v1/auth-hook`, body, { authorization: `Bearer ${INGEST_TOKEN}` });
      const elapsed = performance.now() - start;
      const answer = JSON.parse(res.text) as { results: { status: number | null }[] };
      if (res.status !== 200 || answer.results.some((r) => r.status !== 200)) throw new Error(`unexpected answer ${res.status}: ${res.text}`);
      return elapsed;
    };

    /** Runs `once` CALLS times after WARMUP, each making `requests` receiver requests; prints and returns the added p50/p99. */
    const measure = async (label: string, requests: number, once: () => Promise<number>): Promise<void> => {
      for (let i = 0; i < WARMUP; i += 1) await once();
      await post(`${receiver.origin}/_reset`, "");
      const totals: number[] = [];
      for (let i = 0; i < CALLS; i += 1) totals.push(await once());
      const times = JSON.parse((await post(`${receiver.origin}/_times`, "")).text) as number[];
      if (times.length !== CALLS * requests) throw new Error(`receiver saw ${times.length} requests, expected ${CALLS * requests}`);
      const added = totals.map((total, i) => total - times.slice(i * requests, (i + 1) * requests).reduce((a, b) => a + b, 0)).sort((a, b) => a - b);
      const sortedTotals = [...totals].sort((a, b) => a - b);
      const sortedOwn = [...times].sort((a, b) => a - b);
      const p99 = quantile(added, 0.99);
      console.log(
        `${label}: added p50 ${fmt(quantile(added, 0.5))}, p99 ${fmt(p99)}` +
          (requests > 1 ? ` (p99 ${fmt(p99 / requests)} per endpoint)` : "") +
          `  [round trip p50 ${fmt(quantile(sortedTotals, 0.5))}, p99 ${fmt(quantile(sortedTotals, 0.99))}; receiver's own answer p50 ${fmt(quantile(sortedOwn, 0.5))} per request]`,
      );
    };

    console.log(`auth-hook: ${CALLS} sequential calls per case after ${WARMUP} warm-up calls; receiver answers after ${RECEIVER_DELAY_MS} ms`);
    const sampleBody = JSON.stringify({ type: "member.connecting", padding: "x".repeat(400) });
    await measure("baseline, one raw HTTP POST client → receiver", 1, async () => {
      const start = performance.now();
      const res = await post(`${receiver.origin}/hook/baseline`, sampleBody);
      const elapsed = performance.now() - start;
      if (res.status !== 200) throw new Error(`receiver answered ${res.status}`);
      return elapsed;
    });
    const one = await worldWith(1);
    await measure("auth hook, 1 endpoint ", 1, () => call(one));
    const three = await worldWith(3);
    await measure("auth hook, 3 endpoints", 3, () => call(three));
    await prisma.organization.delete({ where: { id: organization.id } });
  } finally {
    await ingest.stop();
    receiver.stop();
    clientAgent.destroy();
    await prisma.$disconnect();
  }
}

await main();
