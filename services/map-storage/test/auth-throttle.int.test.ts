/**
 * Unknown API keys are throttled per client across map-storage replicas (counters in Redis):
 * after AUTH_FAILURES_MAX failures a client gets 429 with Retry-After for any key, its own valid
 * one included, while other clients' keys work. Clients are told apart by the TCP peer, or by
 * X-Forwarded-For only when TRUST_PROXY says whose to believe.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { testKeyPrefix } from "@vw/testing";
import { createTestWorld, rand, sampleWam, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";

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
