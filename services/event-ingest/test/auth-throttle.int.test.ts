/**
 * Wrong ingest tokens are throttled per client (counters in Redis, shared by replicas): after
 * AUTH_FAILURES_MAX failures the client gets 429 with Retry-After for every request, its valid
 * token included, on /v1/events and /v1/auth-hook alike; the platform's other clients go on. A
 * burst of 300 concurrent guesses gets at most AUTH_FAILURES_MAX of them checked.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { credentialBurst } from "@vw/testing";
import { startIngest, type IngestHarness } from "./harness.js";

let h: IngestHarness;
beforeAll(async () => {
  h = await startIngest({ authThrottle: { maxFailures: 2, windowMs: 60_000 }, trustProxy: ["loopback"] });
});
afterAll(async () => {
  await h.close();
});

const event = (world: string) => ({ id: `evt-${Math.random()}`, world, type: "visitor.registered", timestamp: new Date().toISOString(), data: { uuid: "u-1", name: "N", email: "n@example.test", via: "email" } });

describe("the ingest token", () => {
  it("answers 401 twice, then 429 with Retry-After to that client whatever it sends; another client's events are accepted", async () => {
    const world = await h.createWorld();
    const attacker = { "x-forwarded-for": "203.0.113.70" };
    expect((await h.post(event(world.ref), { token: "wrong-token-1", headers: attacker })).status).toBe(401);
    expect((await h.post(event(world.ref), { token: "wrong-token-2", headers: attacker })).status).toBe(401);
    for (const res of [
      await h.post(event(world.ref), { headers: attacker }),
      await h.request("POST", "/v1/auth-hook", { body: { world: world.ref, roomUrl: "https://play.example.test/@/a/b/c.wam", uuid: "u-1" }, headers: attacker }),
    ]) {
      expect(res.status).toBe(429);
      expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ type: "/problems/too-many-failed-attempts", status: 429 });
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    expect((await h.post(event(world.ref), { headers: { "x-forwarded-for": "198.51.100.70" } })).status).toBe(202);
    expect(await h.redis.hget(`${h.keyPrefix}:auth-failures:ingest-token:203.0.113.70`, "failures")).toBe("2");
  });
});

describe("a burst of 300 concurrent guesses", () => {
  it("checks at most AUTH_FAILURES_MAX tokens: the ingest token at position 150 answers 429 and its event is not accepted", async () => {
    const world = await h.createWorld();
    const attacker = { "x-forwarded-for": "203.0.113.71" };
    const burst = await credentialBurst(async (token) => (await h.post(event(world.ref), { token, headers: attacker })).status, h.token, (i) => `wrong-token-${i}`);
    expect(burst.right).toBe(429);
    expect(burst.byStatus[401]).toBe(2);
    expect(burst.byStatus[429]).toBe(298);
  });
});
