/**
 * `GET /admin/v1/worlds/{org}/{world}/rooms`: admin-api lists a world's rooms by asking map-storage
 * (its own process here, on the test run's PostgreSQL, Redis and S3) with the shared ADMIN_TOKEN,
 * for the operator and for a dashboard session; map-storage away is a 503 of this route only.
 */
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { spawnService, testKeyPrefix, type ServiceProcess } from "@vw/testing";
import { PUBLIC_ADMIN_URL, startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { createWorld, type TestWorld } from "../test/delivery-fixtures.js";
import { asSession, openSession } from "../test/dashboard-fixtures.js";

const mapStorageDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "map-storage");
const adminToken = `test-admin-${randomBytes(16).toString("hex")}`;
let mapStorage: ServiceProcess;
let api: AdminApiHarness;
let away: AdminApiHarness;
let w: TestWorld;

beforeAll(async () => {
  mapStorage = await spawnService(mapStorageDir, { ADMIN_TOKEN: adminToken, REDIS_KEY_PREFIX: `${testKeyPrefix("rooms-")}:`, PLAY_URL: "https://play.example.test" }, { readyTimeoutMs: 60_000 });
  api = await startAdminApi({ adminToken, mapStorageInternalUrl: mapStorage.url });
  // Nothing listens on port 9 (discard) of loopback here: map-storage "away".
  away = await startAdminApi({ adminToken, mapStorageInternalUrl: "http://127.0.0.1:9" });
  w = await createWorld(api);
  const key = (await api.request("POST", `/admin/v1/worlds/${w.org}/${w.world}/api-keys`, { body: { name: "editor" } })).body.token as string;
  const wam = (name: string) => JSON.stringify({ version: "2.1.0", mapUrl: `https://maps.example.test/${name}.tmj`, entities: {}, areas: [], metadata: { name } });
  for (const [path, body] of [["lobby.wam", wam("Lobby")], ["floors/one.wam", wam("One")], ["floors/one.png", "png"], ["floors/two.wam", wam("Two")]] as const) {
    const res = await fetch(`${mapStorage.url}/${w.org}/${w.world}/${path}`, { method: "PUT", headers: { authorization: `Bearer ${key}` }, body });
    expect(res.status).toBe(201);
  }
}, 90_000);

afterAll(async () => {
  await api?.close();
  await away?.close();
  await mapStorage?.stop();
});

const rooms = (w: TestWorld) => `/admin/v1/worlds/${w.org}/${w.world}/rooms`;

describe("GET /admin/v1/worlds/{org}/{world}/rooms", () => {
  it("lists the world's WAM files with their room URLs, mapUrl and metadata, page by page", async () => {
    const first = await api.request("GET", `${rooms(w)}?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.items).toEqual([
      {
        path: "floors/one.wam",
        url: `http://localhost:${new URL(mapStorage.url).port}/${w.org}/${w.world}/floors/one.wam`,
        roomUrl: `https://play.example.test/@/${w.org}/${w.world}/floors/one.wam`,
        mapUrl: "https://maps.example.test/One.tmj",
        metadata: { name: "One" },
      },
      expect.objectContaining({ path: "floors/two.wam" }),
    ]);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const second = await api.request("GET", `${rooms(w)}?limit=2&cursor=${first.body.nextCursor}`);
    expect({ paths: second.body.items.map((i: { path: string }) => i.path), next: second.body.nextCursor }).toEqual({ paths: ["lobby.wam"], next: null });
  });

  it("answers a dashboard session of the world (view), and 404 for another world", async () => {
    const session = asSession(api, await openSession(api, PUBLIC_ADMIN_URL, w.org, w.world, { capabilities: ["view"] }), PUBLIC_ADMIN_URL);
    const res = await session("GET", rooms(w));
    expect({ status: res.status, count: res.body.items.length }).toEqual({ status: 200, count: 3 });
    const other = await createWorld(api);
    expect((await session("GET", rooms(other))).status).toBe(404);
  });

  it("refuses a cursor that is not one of its pages, and an unknown world", async () => {
    expect((await api.request("GET", `${rooms(w)}?cursor=not%20a%20cursor`)).body.parameter).toBe("cursor");
    expect((await api.request("GET", `${rooms(w)}?limit=500`)).body.parameter).toBe("limit");
    expect((await api.request("GET", `/admin/v1/worlds/${w.org}/nope/rooms`)).status).toBe(404);
  });

  it("is a 503 problem when map-storage does not answer, and only this route is affected", async () => {
    const res = await away.request("GET", rooms(w));
    expect({ status: res.status, type: res.body.type }).toEqual({ status: 503, type: "/problems/dependency-unavailable" });
    expect((await away.request("GET", `/admin/v1/worlds/${w.org}/${w.world}`)).status).toBe(200);
  });
});
