/**
 * `pnpm bench auth-hook`: the latency event-ingest adds to `POST /v1/auth-hook` on top of the
 * receivers' own answer time. One event-ingest process (spawned from src, as in production) and
 * one receiver process that answers after a fixed delay (BENCH_RECEIVER_DELAY_MS, 2 ms) and
 * records its own answer time per request. Sequential calls (the hook is on one member's critical
 * path; concurrency would measure queueing instead), for a world with one `auth` endpoint and
 * one with three, in the same run. added = client round trip − Σ receiver answer times of that call.
 * Expects DATABASE_URL and REDIS_URL (scripts/bench.mjs provides them).
 */
import { spawn } from "node:child_process";
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
  });
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
      const res = await fetch(`${ingest.url}/v1/auth-hook`, { method: "POST", headers: { authorization: `Bearer ${INGEST_TOKEN}`, "content-type": "application/json" }, body });
      const answer = (await res.json()) as { results: { status: number | null }[] };
      const elapsed = performance.now() - start;
      if (res.status !== 200 || answer.results.some((r) => r.status !== 200)) throw new Error(`unexpected answer ${res.status}: ${JSON.stringify(answer)}`);
      return elapsed;
    };

    const run = async (endpoints: number) => {
      const world = await worldWith(endpoints);
      for (let i = 0; i < WARMUP; i += 1) await call(world);
      await fetch(`${receiver.origin}/_reset`, { method: "POST" });
      const totals: number[] = [];
      for (let i = 0; i < CALLS; i += 1) totals.push(await call(world));
      const times = (await (await fetch(`${receiver.origin}/_times`)).json()) as number[];
      if (times.length !== CALLS * endpoints) throw new Error(`receiver saw ${times.length} requests, expected ${CALLS * endpoints}`);
      const added = totals.map((total, i) => total - times.slice(i * endpoints, (i + 1) * endpoints).reduce((a, b) => a + b, 0)).sort((a, b) => a - b);
      const sortedTotals = [...totals].sort((a, b) => a - b);
      const sortedOwn = [...times].sort((a, b) => a - b);
      console.log(
        `${endpoints} endpoint${endpoints === 1 ? " " : "s"}: added p50 ${fmt(quantile(added, 0.5))}, p99 ${fmt(quantile(added, 0.99))}` +
          `  (round trip p50 ${fmt(quantile(sortedTotals, 0.5))}, p99 ${fmt(quantile(sortedTotals, 0.99))}; receiver's own answer p50 ${fmt(quantile(sortedOwn, 0.5))} per request)`,
      );
    };

    console.log(`auth-hook: ${CALLS} sequential calls per case after ${WARMUP} warm-up calls; receiver answers after ${RECEIVER_DELAY_MS} ms`);
    await run(1);
    await run(3);
    await prisma.organization.delete({ where: { id: organization.id } });
  } finally {
    await ingest.stop();
    receiver.stop();
    await prisma.$disconnect();
  }
}

await main();
