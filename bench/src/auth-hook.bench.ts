/**
 * `pnpm bench auth-hook`: the latency event-ingest adds to `POST /v1/auth-hook`. One event-ingest
 * process (spawned from its sources by @vw/testing) and one receiver process that answers after a
 * fixed delay (BENCH_RECEIVER_DELAY_MS, 2 ms) and records its own answer time per request. Sequential calls
 * (the hook is on one member's critical path; concurrency would measure queueing instead), for a
 * world with one `auth` endpoint and one with three, in the same run.
 *
 * Each hook call is paired with its direct equivalent, run right after it by the same client: the
 * same receiver URLs POSTed one after another straight from the client, with a body and headers
 * of the same size. Interleaving puts both under the same machine conditions (these 2 shared
 * cores are noisy: a separate baseline phase drifts). Two figures per case:
 * - overhead over calling the receivers directly = hook round trip − direct round trip, at the
 *   same quantile (how proxy overhead is usually stated): what a caller pays for going through
 *   the service instead of calling the receivers itself. The goal (p99 under 5 ms per endpoint)
 *   is judged on this one.
 * - added over the receivers' own answer time = hook round trip − Σ the receiver's own answer
 *   times of that call: stricter, it also counts the client's own hop, which a direct call pays too.
 * A floor comes first: the same pairs through a bare node:http forwarder (bare-forwarder.mjs),
 * which does nothing but forward; what the hook adds beyond it is the service's own work.
 * The client is node:http with a keep-alive agent (as light as a client gets, so its own cost
 * does not hide the service's). Expects DATABASE_URL and a Redis topology, REDIS_URL by default
 * (scripts/bench.mjs provides them). BENCH_NODE_ARGS adds node flags to the service; BENCH_PROFILE_DIR CPU-profiles it.
 */
import { spawn } from "node:child_process";
import http from "node:http";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createPrismaClient } from "@vw/db";
import { spawnService } from "@vw/testing";
import { createSecretBox, generateSecret, generateSecretBoxKey } from "@vw/webhook-core";
import { httpRequest } from "./lib/bench-kit.js";
import { GoalTally } from "./lib/goals.js";
import { benchRedisEnv } from "./lib/redis-target.js";
import { serviceDir } from "./lib/services.js";

/** The helper processes' scripts (receiver, forwarder). */
const helpers = join(dirname(fileURLToPath(import.meta.url)), "lib");
const CALLS = Number(process.env.BENCH_CALLS ?? 2000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 200);
const RECEIVER_DELAY_MS = Number(process.env.BENCH_RECEIVER_DELAY_MS ?? 2);
const INGEST_TOKEN = "bench-ingest-token-3d7a1f9c5e2b8046";

const databaseUrl = process.env.DATABASE_URL!;
const secretsKey = generateSecretBoxKey();
const box = createSecretBox(secretsKey);

const quantile = (sorted: readonly number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
const fmt = (ms: number): string => `${ms.toFixed(2)} ms`;
const clientAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
/** The goal, per endpoint, on the p99 of the overhead over calling the receivers directly. */
const GOAL_P99_PER_ENDPOINT_MS = 5;
const goals = new GoalTally();

/** One POST over the keep-alive agent; resolves with the status and the body text. */
function post(url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return httpRequest(clientAgent, "POST", url, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...headers }, body);
}

/** Runs one of the bench's helper scripts in its own process; resolves once it prints its port. */
async function startHelper(script: string, args: string[]): Promise<{ origin: string; stop: () => void }> {
  const child = spawn(process.execPath, [join(helpers, script), ...args], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => child.stdout!.once("data", (d: Buffer) => resolve(JSON.parse(d.toString()).port)));
  return { origin: `http://127.0.0.1:${port}`, stop: () => child.kill("SIGKILL") };
}

async function main(): Promise<void> {
  const prisma = createPrismaClient(databaseUrl);
  const receiver = await startHelper("hook-receiver.mjs", [String(RECEIVER_DELAY_MS)]);
  let forwarder: { origin: string; stop: () => void } | undefined;
  const ingest = await spawnService(serviceDir("event-ingest"), {
    DATABASE_URL: databaseUrl,
    ...benchRedisEnv(),
    REDIS_KEY_PREFIX: `vwbench-${randomBytes(4).toString("hex")}`,
    INGEST_TOKEN,
    SECRETS_ENCRYPTION_KEY: secretsKey,
    ENDPOINT_URL_POLICY: "any",
    LOG_LEVEL: "warn",
  }, { nodeArgs: [...(process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean), ...(process.env.BENCH_PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [])] });
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

    const hookBody = JSON.stringify({
      world: "",
      roomUrl: "https://play.example.test/@/acme/hq/lobby.wam",
      uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b",
      accessTokens: [{ provider: "acme-okta", token: "eyJhbGciOiJSUzI1NiJ9.bench.sig" }, { provider: "google", token: "ya29.bench" }],
    });
    /** One sequential call of `origin`'s hook for `world`; its round trip in ms. */
    const hookCall = async (origin: string, world: string): Promise<number> => {
      const body = hookBody.replace('"world":""', `"world":${JSON.stringify(world)}`);
      const start = performance.now();
      const res = await post(`${origin}/v1/auth-hook`, body, { authorization: `Bearer ${INGEST_TOKEN}` });
      const elapsed = performance.now() - start;
      const answer = JSON.parse(res.text) as { results: { status: number | null }[] };
      if (res.status !== 200 || answer.results.some((r) => r.status !== 200)) throw new Error(`unexpected answer ${res.status}: ${res.text}`);
      return elapsed;
    };
    // What one endpoint receives from the hook: a member.connecting envelope and the three
    // Standard Webhooks headers, of the same sizes.
    const directBody = JSON.stringify({
      deliveryId: "0b9f7f0e-7b8a-4d5e-9b51-2f1f0c8d9e11",
      apiVersion: "2026-11-01",
      type: "member.connecting",
      timestamp: new Date().toISOString(),
      world: { id: "0b9f7f0e-7b8a-4d5e-9b51-2f1f0c8d9e12", slug: "acme/w1-000000", url: "https://play.example.test/@/acme/w1-000000" },
      data: { roomUrl: "https://play.example.test/@/acme/hq/lobby.wam", uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b", accessTokens: [{ provider: "acme-okta", token: "eyJhbGciOiJSUzI1NiJ9.bench.sig" }] },
    });
    const directHeaders = {
      "webhook-id": "0b9f7f0e-7b8a-4d5e-9b51-2f1f0c8d9e11",
      "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
      "webhook-signature": `v1,${randomBytes(32).toString("base64")}`,
      "user-agent": "vw-webhooks/1.0",
    };
    const direct = async (requests: number): Promise<number> => {
      const start = performance.now();
      for (let i = 0; i < requests; i += 1) {
        const res = await post(`${receiver.origin}/direct/${i}`, directBody, directHeaders);
        if (res.status !== 200) throw new Error(`receiver answered ${res.status}`);
      }
      return performance.now() - start;
    };

    /**
     * CALLS pairs (a hook call, then its direct equivalent) after WARMUP pairs; prints both figures.
     * `judged`: whether the goal applies (the hook's cases; the floor is a reference, not a goal).
     */
    const measure = async (label: string, endpoints: number, call: () => Promise<number>, judged: boolean): Promise<void> => {
      for (let i = 0; i < WARMUP; i += 1) {
        await call();
        await direct(endpoints);
      }
      await post(`${receiver.origin}/_reset`, "");
      const viaHook: number[] = [];
      const straight: number[] = [];
      for (let i = 0; i < CALLS; i += 1) {
        viaHook.push(await call());
        straight.push(await direct(endpoints));
      }
      const log = JSON.parse((await post(`${receiver.origin}/_times`, "")).text) as [string, number][];
      const own = log.filter(([path]) => path.startsWith("/hook/")).map(([, ms]) => ms);
      if (own.length !== CALLS * endpoints || log.length !== 2 * CALLS * endpoints) {
        throw new Error(`receiver saw ${own.length} hook and ${log.length - own.length} direct requests, expected ${CALLS * endpoints} of each`);
      }
      const added = viaHook.map((total, i) => total - own.slice(i * endpoints, (i + 1) * endpoints).reduce((a, b) => a + b, 0)).sort((a, b) => a - b);
      const hookSorted = [...viaHook].sort((a, b) => a - b);
      const directSorted = [...straight].sort((a, b) => a - b);
      const at = (q: number) => ({ hook: quantile(hookSorted, q), direct: quantile(directSorted, q), added: quantile(added, q) });
      const [p50, p99] = [at(0.5), at(0.99)];
      const per = (ms: number): string => (endpoints > 1 ? ` (${fmt(ms / endpoints)} per endpoint)` : "");
      console.log(`${label}`);
      const goal = judged ? ` (goal p99 < ${GOAL_P99_PER_ENDPOINT_MS} ms per endpoint)` : "";
      if (judged) goals.judge((p99.hook - p99.direct) / endpoints < GOAL_P99_PER_ENDPOINT_MS);
      console.log(`  overhead over calling the receiver${endpoints > 1 ? "s" : ""} directly: p50 ${fmt(p50.hook - p50.direct)}, p99 ${fmt(p99.hook - p99.direct)}${per(p99.hook - p99.direct)}${goal}`);
      console.log(`    round trip through the service p50 ${fmt(p50.hook)}, p99 ${fmt(p99.hook)}; direct p50 ${fmt(p50.direct)}, p99 ${fmt(p99.direct)}`);
      console.log(`  added over the receivers' own answer time (counts the client's hop too): p50 ${fmt(p50.added)}, p99 ${fmt(p99.added)}${per(p99.added)}`);
    };

    console.log(`auth-hook: ${CALLS} sequential hook calls per case, each followed by its direct equivalent, after ${WARMUP} warm-up pairs; receiver answers after ${RECEIVER_DELAY_MS} ms`);
    forwarder = await startHelper("bare-forwarder.mjs", [`${receiver.origin}/hook/forwarder`, String(Buffer.byteLength(directBody))]);
    const bare = forwarder.origin;
    await measure("floor, 1 endpoint: a bare node:http forwarder (no auth, validation, lookup, signing or history)", 1, () => hookCall(bare, "acme/w"), false);
    const one = await worldWith(1);
    await measure("auth hook, 1 endpoint", 1, () => hookCall(ingest.url, one), true);
    const three = await worldWith(3);
    await measure("auth hook, 3 endpoints", 3, () => hookCall(ingest.url, three), true);
    await prisma.organization.delete({ where: { id: organization.id } });
    console.log(goals.summary());
  } finally {
    await ingest.stop();
    forwarder?.stop();
    receiver.stop();
    clientAgent.destroy();
    await prisma.$disconnect();
  }
}

await main();
