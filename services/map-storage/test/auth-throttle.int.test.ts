/**
 * Unknown API keys are throttled per client across map-storage replicas (counters in Redis):
 * after AUTH_FAILURES_MAX failures a client gets 429 with Retry-After for any key, its own valid
 * one included, while other clients' keys work. Clients are told apart by the TCP peer, or by
 * X-Forwarded-For only when TRUST_PROXY says whose to believe. The map authors' tools (upload,
 * download, rooms) count on the same counter, and on the room listing the operator's token is
 * refused too once a client is throttled. A burst of concurrent guesses gets no more checked than
 * AUTH_FAILURES_MAX, so the world's key inside it is refused too.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { credentialBurst, testKeyPrefix } from "@vw/testing";
import { createTestWorld, rand, sampleWam, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";
import { makeZip, starterMap } from "./zip-fixtures.js";

let prisma: PrismaClient;
let w: TestWorld;
beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
});
afterAll(async () => {
  await prisma.$disconnect();
});

const put = (ms: RunningMapStorage, token: string, headers: Record<string, string> = {}) =>
  fetch(`${ms.baseUrl}/${w.org}/${w.world}/rooms/${rand()}.wam`, { method: "PUT", headers: { authorization: `Bearer ${token}`, ...headers }, body: JSON.stringify(sampleWam()) });

describe("behind a trusted proxy, two replicas", () => {
  let a: RunningMapStorage;
  let b: RunningMapStorage;
  beforeAll(async () => {
    // One Redis prefix for both: two replicas of one deployment.
    const env = { REDIS_KEY_PREFIX: `${testKeyPrefix("ms-throttle-")}:`, AUTH_FAILURES_MAX: "3", AUTH_FAILURES_WINDOW_S: "60", TRUST_PROXY: "loopback" };
    a = await startMapStorage(env);
    b = await startMapStorage(env);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it("answers 429 with Retry-After once a client has failed too often on any replica, even for a valid key; other clients go on", async () => {
    const attacker = { "x-forwarded-for": "203.0.113.9" };
    const statuses = [(await put(a, "vwk_guess1", attacker)).status, (await put(b, "vwk_guess2", attacker)).status, (await put(a, "vwk_guess3", attacker)).status];
    expect(statuses).toEqual([401, 401, 401]);
    const throttled = await put(b, "vwk_guess4", attacker);
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(throttled.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(await throttled.json()).toMatchObject({ type: "/problems/too-many-failed-attempts", status: 429 });
    expect((await put(a, w.token, attacker)).status).toBe(429);
    const stores = a.store.writes + b.store.writes;
    expect((await put(a, w.token, { "x-forwarded-for": "198.51.100.4" })).status).toBe(201);
    expect((await put(b, w.token)).status).toBe(201);
    expect(a.store.writes + b.store.writes).toBe(stores + 2);
    // GET needs no key and is never throttled.
    expect((await fetch(`${a.baseUrl}/${w.org}/${w.world}/rooms/none.wam`, { headers: attacker })).status).toBe(404);
  });
});

describe("a burst of 300 concurrent guesses over two replicas", () => {
  let a: RunningMapStorage;
  let b: RunningMapStorage;
  beforeAll(async () => {
    const env = { REDIS_KEY_PREFIX: `${testKeyPrefix("ms-burst-")}:`, AUTH_FAILURES_MAX: "20", AUTH_FAILURES_WINDOW_S: "60", TRUST_PROXY: "loopback" };
    a = await startMapStorage(env);
    b = await startMapStorage(env);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it("checks at most AUTH_FAILURES_MAX keys: the world's key at position 150 answers 429 and nothing is written", async () => {
    const attacker = { "x-forwarded-for": "203.0.113.40" };
    const writes = a.store.writes + b.store.writes;
    const burst = await credentialBurst(async (token, i) => (await put(i % 2 === 0 ? a : b, token, attacker)).status, w.token, (i) => `vwk_guess${i}_${rand(8)}`);
    expect(burst.right).toBe(429);
    expect(burst.byStatus[401]).toBe(20);
    expect(burst.byStatus[429]).toBe(280);
    expect(a.store.writes + b.store.writes).toBe(writes);
  });
});

describe("without TRUST_PROXY", () => {
  let ms: RunningMapStorage;
  beforeAll(async () => {
    ms = await startMapStorage({ AUTH_FAILURES_MAX: "2" });
  });
  afterAll(async () => {
    await ms.close();
  });

  it("ignores X-Forwarded-For: a client cannot escape its counter by inventing addresses", async () => {
    const statuses = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await put(ms, `vwk_guess${i}`, { "x-forwarded-for": `192.0.2.${i}` })).status);
    expect(statuses).toEqual([401, 401, 429, 429]);
  });
});

describe("map authors' tools", () => {
  const ADMIN_TOKEN = `operator-${rand(12)}`;
  let ms: RunningMapStorage;
  let zip: Buffer;
  beforeAll(async () => {
    ms = await startMapStorage({ AUTH_FAILURES_MAX: "3", AUTH_FAILURES_WINDOW_S: "60", TRUST_PROXY: "loopback", ADMIN_TOKEN });
    zip = await makeZip(starterMap("https://maps.example.com/m.tmj"));
  });
  afterAll(async () => {
    await ms.close();
  });

  const base = () => `${ms.baseUrl}/${w.org}/${w.world}`;
  const upload = (token: string, client: string) => {
    const form = new FormData();
    form.set("file", new Blob([zip], { type: "application/zip" }), "dist.zip");
    form.set("directory", `maps-${rand()}`);
    return fetch(`${base()}/upload`, { method: "POST", headers: { authorization: `Bearer ${token}`, "x-forwarded-for": client }, body: form });
  };
  const rooms = (token: string, client: string) => fetch(`${base()}/rooms`, { headers: { authorization: `Bearer ${token}`, "x-forwarded-for": client } });
  const expectThrottled = async (res: Response) => {
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(await res.json()).toMatchObject({ type: "/problems/too-many-failed-attempts", status: 429 });
  };

  it("answers 429 on POST {base}/upload once a client has failed too often, even for the world's key, and writes nothing", async () => {
    const attacker = "203.0.113.20";
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await upload(`vwk_guess${i}`, attacker)).status);
    expect(statuses).toEqual([401, 401, 401]);
    const writes = ms.store.writes;
    await expectThrottled(await upload(w.token, attacker));
    // Download shares the counter: switching tools buys nothing.
    await expectThrottled(await fetch(`${base()}/download`, { headers: { authorization: `Bearer ${w.token}`, "x-forwarded-for": attacker } }));
    expect(ms.store.writes).toBe(writes);
    // Another client's upload with the world's key goes through.
    expect((await upload(w.token, "198.51.100.20")).status).toBe(200);
    expect(ms.store.writes).toBeGreaterThan(writes);
  });

  it("answers 429 on GET {base}/rooms once a client has failed too often, for the operator's token too; failures on other routes count", async () => {
    const attacker = "203.0.113.21";
    expect((await rooms(`not-the-operator-${rand(16)}`, attacker)).status).toBe(401);
    expect((await rooms("vwk_guess", attacker)).status).toBe(401);
    expect((await put(ms, "vwk_guess", { "x-forwarded-for": attacker })).status).toBe(401);
    // The operator's token is not even compared now, nor the world's key.
    await expectThrottled(await rooms(ADMIN_TOKEN, attacker));
    await expectThrottled(await rooms(w.token, attacker));
    // Other clients list the rooms with either.
    expect((await rooms(ADMIN_TOKEN, "198.51.100.21")).status).toBe(200);
    expect((await rooms(w.token, "198.51.100.22")).status).toBe(200);
  });
});
