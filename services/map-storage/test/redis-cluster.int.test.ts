/**
 * map-storage on a Redis Cluster (REDIS_CLUSTER_NODES; a private cluster of packages/testing, never
 * the machine's Redis), two replicas on one key prefix: every Redis feature works there because
 * each command touches one key. An upload's world lock holds across the replicas (two uploads of
 * one directory end as one of them) and is released; file writes keep their version markers; the
 * room listing answers; and failed API keys are counted in the Cluster under each client's key, so
 * both replicas refuse a guesser (429), even on the room listing with the operator's token.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { startRedisCluster, testKeyPrefix, type PrivateRedisCluster } from "@vw/testing";
import { Cluster } from "ioredis";
import { createTestWorld, rand, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";
import { makeZip } from "./zip-fixtures.js";

const ADMIN_TOKEN = `operator-${rand(16)}`;
const prefix = `${testKeyPrefix("ms-cluster-")}:`;
let cluster: PrivateRedisCluster;
let inspect: Cluster;
let prisma: PrismaClient;
let a: RunningMapStorage;
let b: RunningMapStorage;
let w: TestWorld;

beforeAll(async () => {
  cluster = await startRedisCluster({ primaries: 3, replicasPerPrimary: 0 });
  inspect = new Cluster(cluster.nodes.map(({ host, port }) => ({ host, port })), { scaleReads: "master" });
  prisma = testPrisma();
  // REDIS_URL blanked: the run's own would be a second topology.
  const env = { REDIS_URL: "", REDIS_CLUSTER_NODES: cluster.seeds, REDIS_KEY_PREFIX: prefix, ADMIN_TOKEN, AUTH_FAILURES_MAX: "3", AUTH_FAILURES_WINDOW_S: "60" };
  [a, b] = await Promise.all([startMapStorage(env), startMapStorage(env)]);
  w = await createTestWorld(prisma);
}, 90_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await inspect?.quit();
  await cluster?.stop();
  await prisma?.$disconnect();
});

const base = (ms: RunningMapStorage) => `${ms.baseUrl}/${w.org}/${w.world}`;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function upload(ms: RunningMapStorage, files: Record<string, string>, directory: string): Promise<number> {
  const form = new FormData();
  form.set("file", new Blob([await makeZip(files)], { type: "application/zip" }), "dist.zip");
  form.set("directory", directory);
  const res = await fetch(`${base(ms)}/upload`, { method: "POST", headers: bearer(w.token), body: form });
  await res.arrayBuffer();
  return res.status;
}

describe("map-storage on a Redis Cluster", () => {
  it("two uploads of one directory through two replicas at once end as one of them, and the world's lock is released", async () => {
    const directory = `race-${rand()}`;
    const set = (tag: string) => Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`${tag}-${i}.txt`, `${tag} ${i}`]));
    expect(await Promise.all([upload(a, set("a"), directory), upload(b, set("b"), directory)])).toEqual([200, 200]);
    const present = async (tag: string) =>
      (await Promise.all(Array.from({ length: 30 }, async (_, i) => (await fetch(`${base(b)}/${directory}/${tag}-${i}.txt`)).status))).filter((s) => s === 200).length;
    expect([await present("a"), await present("b")].sort((x, y) => x - y)).toEqual([0, 30]);
    expect(await inspect.exists(`${prefix}lock:upload:${w.org}/${w.world}`)).toBe(0);
  }, 60_000);

  it("writes a file through one replica and serves it from the other, and lists the world's rooms", async () => {
    const wam = JSON.stringify({ version: "2.1.0", mapUrl: "https://maps.example.com/hall.tmj", entities: {}, areas: [], metadata: { name: "Hall" } });
    const put = await fetch(`${base(a)}/cluster/hall.wam`, { method: "PUT", headers: bearer(w.token), body: wam });
    expect(put.status).toBe(201);
    expect(await (await fetch(`${base(b)}/cluster/hall.wam`)).json()).toMatchObject({ metadata: { name: "Hall" } });
    const rooms = await fetch(`${base(b)}/rooms`, { headers: bearer(ADMIN_TOKEN) });
    expect(rooms.status).toBe(200);
    expect(((await rooms.json()) as { items: { path: string }[] }).items.map((i) => i.path)).toContain("cluster/hall.wam");
  });

  it("counts a client's failed keys in the Cluster, so the other replica refuses it too, the operator's token on rooms included", async () => {
    const statuses = [];
    for (const ms of [a, b, a]) statuses.push((await fetch(`${base(ms)}/rooms`, { headers: bearer(`vwk_guess_${rand()}`) })).status);
    expect(statuses).toEqual([401, 401, 401]);
    expect(await inspect.hget(`${prefix}auth-failures:api-key:127.0.0.1`, "failures")).toBe("3");
    expect((await fetch(`${base(b)}/rooms`, { headers: bearer(ADMIN_TOKEN) })).status).toBe(429);
    expect((await fetch(`${base(a)}/cluster/other.wam`, { method: "PUT", headers: bearer(w.token), body: "{}" })).status).toBe(429);
  });
});
