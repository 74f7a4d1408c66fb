/**
 * Hostile input on the worker's own HTTP port (`/healthz`, `/readyz`, `/metrics`):
 * generated malformed and arbitrary requests to every registered route never get a 5xx or a bare
 * error, and what Node's parser refuses is a problem document too. `FUZZ_SEED` replays a run.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { closeServer, listen, type Logger } from "@vw/service-kit";
import {
  arbitraryRequests,
  fuzzRuns,
  fuzzSeed,
  fuzzNodeLevel,
  fuzzTarget,
  malformedRequests,
  registeredRoutes,
  type FuzzTarget,
} from "@vw/testing";
import { createWorkerApp } from "../src/app.js";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
let server: Server;
let target: FuzzTarget;
const errors: unknown[] = [];

beforeAll(async () => {
  h = await startHarness();
  const noop = (): void => undefined;
  const logger = { trace: noop, debug: noop, info: noop, warn: noop, error: (f: unknown) => void errors.push(f), fatal: noop, child: () => logger };
  const app = createWorkerApp({ pool: h.worker.db.pool, redis: h.redis, worker: h.worker, logger: logger as unknown as Logger });
  server = await listen(app, 0, "127.0.0.1");
  target = { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, routes: registeredRoutes(app) };
});
afterAll(async () => {
  await closeServer(server);
  await h.close();
});

it("fuzzes every route of the worker's HTTP port", async () => {
  expect(target.routes.map((r) => `${r.method} ${r.path}`)).toEqual(expect.arrayContaining(["get /healthz", "get /readyz", "get /metrics"]));
  await fuzzTarget(target.baseUrl, malformedRequests(target), { seed: fuzzSeed("delivery-worker malformed"), numRuns: fuzzRuns(100) });
  await fuzzTarget(target.baseUrl, arbitraryRequests(target), { seed: fuzzSeed("delivery-worker arbitrary"), numRuns: fuzzRuns(100) });
  await fuzzNodeLevel(target.baseUrl, "/metrics", { seed: fuzzSeed("delivery-worker node-level"), numRuns: fuzzRuns(30) });
  expect(errors).toEqual([]);
  expect((await fetch(`${target.baseUrl}/healthz`)).status).toBe(200);
});
