/**
 * Hostile input on every map-storage route: the express routes plus the file API's
 * address space (`/<org>/<world>/<path>`, served by one catch-all handler). Generated malformed
 * bodies, headers and paths never get a 5xx or a bare error, are refused with a problem document,
 * never write to the bucket, and leave the app answering; JSON nesting is limited for stored and
 * patched files. `FUZZ_SEED` replays a run, `FUZZ_RUNS` resizes it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import {
  arbitraryRequests,
  fc,
  fuzzRuns,
  fuzzSeed,
  fuzzNodeLevel,
  fuzzTarget,
  malformedRequests,
  registeredRoutes,
  type FuzzTarget,
  type RegisteredRoute,
} from "@vw/testing";
import { createTestWorld, rand, sampleWam, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";

let prisma: PrismaClient;
let ms: RunningMapStorage;
let w: TestWorld;
let target: FuzzTarget;
const ROOM = "rooms/fuzz.wam";

const FILE_ROUTES: RegisteredRoute[] = ["get", "head", "put", "patch", "delete", "options"].map((method) => ({ method, path: "/{org}/{world}/{path}" }));

beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
  ms = await startMapStorage({ PUBLIC_MAP_STORAGE_URL: "https://maps.example.com" });
  expect((await put(ROOM, JSON.stringify(sampleWam()))).status).toBe(201);
  target = {
    baseUrl: ms.baseUrl,
    routes: [...registeredRoutes(ms.app), ...FILE_ROUTES],
    // Only a .wam path is known: every malformed body sent to it must be refused (other files are stored as sent).
    knownParams: { org: [w.org], world: [w.world], path: [ROOM], file: ["2.1.0.json"] },
    authHeaders: { authorization: `Bearer ${w.token}` },
    bodyType: (route) => (route.method === "patch" ? "application/json-patch+json" : "application/json"),
  };
});
afterAll(async () => {
  await ms.close();
  await prisma.$disconnect();
});

const url = (path: string) => `${ms.baseUrl}/${w.org}/${w.world}/${path}`;
const put = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url(path), { method: "PUT", headers: { authorization: `Bearer ${w.token}`, "content-type": "application/json", ...headers }, body });
const patch = (path: string, ops: unknown, headers: Record<string, string> = {}) =>
  fetch(url(path), {
    method: "PATCH",
    headers: { authorization: `Bearer ${w.token}`, "content-type": "application/json-patch+json", ...headers },
    body: typeof ops === "string" ? ops : JSON.stringify(ops),
  });
const room = async () => {
  const res = await fetch(url(ROOM));
  return { etag: res.headers.get("etag"), body: await res.text() };
};
async function problem(res: Response, status: number, type?: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  const body = (await res.json()) as { type: string; errors?: Array<{ pointer: string; detail: string }>; limit?: number };
  if (type) expect(body.type).toBe(`/problems/${type}`);
  return body;
}
const nested = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${"}".repeat(depth - 1)}`;

describe("hostile input on every map-storage route", () => {
  it("refuses every generated malformed request with a 4xx problem document, writing nothing", async () => {
    const before = await room();
    const writes = ms.store.writes;
    await fuzzTarget(ms.baseUrl, malformedRequests(target), { seed: fuzzSeed("map-storage malformed"), numRuns: fuzzRuns(300) });
    expect(ms.store.writes).toBe(writes);
    expect(await room()).toEqual(before);
  });

  it("never answers 5xx or a bare error to arbitrary requests", async () => {
    await fuzzTarget(ms.baseUrl, arbitraryRequests(target), { seed: fuzzSeed("map-storage arbitrary"), numRuns: fuzzRuns(300) });
    expect((await fetch(`${ms.baseUrl}/healthz`)).status).toBe(200);
  });

  it("answers what Node's HTTP parser refuses with a problem document too", async () => {
    await fuzzNodeLevel(ms.baseUrl, `/${w.org}/${w.world}/${ROOM}`, { seed: fuzzSeed("map-storage node-level"), numRuns: fuzzRuns(40) });
  });
});

describe("JSON nesting limit of stored and patched files", () => {
  it("stores a WAM whose entity nests 64 levels, refuses one level more (and 10,000) with 400, keeping the old file", async () => {
    const path = `rooms/deep-${rand()}.wam`;
    const ok = sampleWam({ entities: { e: JSON.parse(nested(62)) } });
    expect((await put(path, JSON.stringify(ok))).status).toBe(201);
    for (const depth of [63, 10_000]) {
      const body = `{"version":"2.1.0","mapUrl":"https://maps.example.com/m.tmj","areas":[],"entities":{"e":${nested(depth)}}}`;
      const refused = await problem(await put(path, body), 400, "too-deeply-nested");
      expect(refused.limit).toBe(64);
    }
    expect(JSON.parse(await (await fetch(url(path))).text())).toEqual(ok);
    expect((await patch(path, [{ op: "replace", path: "/metadata/name", value: "Still editable" }])).status).toBe(200);
  });

  it("refuses a patch whose value or result nests too deep (400/422), and never 500s on a deep file stored before the limit", async () => {
    const path = `rooms/patch-${rand()}.wam`;
    expect((await put(path, JSON.stringify(sampleWam({ entities: { e: JSON.parse(nested(30)) } })))).status).toBe(201);
    await problem(await patch(path, `[{"op":"add","path":"/entities/x","value":${nested(10_000)}}]`), 400, "too-deeply-nested");
    // Each is within the limit alone (a 40-level value, a 32-level file); together they pass it.
    const deepInside = `/entities/e${"/a".repeat(29)}/x`;
    const result = await problem(await patch(path, [{ op: "add", path: deepInside, value: JSON.parse(nested(40)) }]), 422, "too-deeply-nested");
    expect(result.errors?.[0]?.pointer).toMatch(/^\/entities\/e(\/a)+\/x(\/a)*$/);

    // A file written straight to the bucket (as by a version without the limit).
    const legacy = `rooms/legacy-${rand()}.wam`;
    const deep = `{"version":"2.1.0","mapUrl":"https://maps.example.com/m.tmj","areas":[],"entities":{"e":${nested(10_000)}}}`;
    await ms.store.inner.put(`${w.org}/${w.world}/${legacy}`, Buffer.from(deep), "application/json");
    await problem(await patch(legacy, [{ op: "add", path: "/entities/y", value: 1 }]), 409, "too-deeply-nested");
    expect(await (await fetch(url(legacy))).text()).toBe(deep);
  });

  it("refuses NUL and lone surrogates in a WAM or a patch with 400 naming the place", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("\u0000", "\ud800", "\udc00"), fc.boolean(), async (bad, viaPatch) => {
        const before = await room();
        const res = viaPatch
          ? await patch(ROOM, [{ op: "replace", path: "/metadata/name", value: `a${bad}b` }])
          : await put(ROOM, JSON.stringify(sampleWam({ metadata: { name: `a${bad}b` } })));
        const body = await problem(res, 400, "invalid-request");
        expect(body.errors?.[0]?.pointer).toBe(viaPatch ? "/0/value" : "/metadata/name");
        expect(await room()).toEqual(before);
      }),
      { seed: fuzzSeed("map-storage text"), numRuns: fuzzRuns(12) },
    );
  });

  it("refuses a JSON body declared in another charset than UTF-8 with 415", async () => {
    const before = await room();
    await problem(await put(ROOM, JSON.stringify(sampleWam()), { "content-type": "application/json; charset=utf-16le" }), 415);
    await problem(await patch(ROOM, "[]", { "content-type": "application/json-patch+json; charset=utf-16be" }), 415);
    expect(await room()).toEqual(before);
  });
});
