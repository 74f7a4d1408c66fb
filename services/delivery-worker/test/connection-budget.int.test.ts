/**
 * The delivery worker holds to its connection budget under load: a real worker process with a
 * small DATABASE_POOL_MAX drains many endpoints at once (claims, group commits, the reconciler's
 * reads), and PostgreSQL (pg_stat_activity, polled throughout) never lists more of its connections
 * than DATABASE_POOL_MAX, each named `delivery-worker`. No timing is asserted: the test waits for
 * every delivery to arrive.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { createPgPool, type PgPool } from "@vw/db";
import { eventually, spawnService, watchConnections, type ServiceProcess } from "@vw/testing";
import { countingReceiver, startHarness, type Harness } from "./harness.js";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const POOL_MAX = 3;
const pgPort = Number(new URL(process.env.DATABASE_URL as string).port || 5432);

let h: Harness;
let observer: PgPool;
let worker: ServiceProcess | undefined;
let receiver: Awaited<ReturnType<typeof countingReceiver>>["receiver"];

beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false });
  observer = createPgPool(process.env.DATABASE_URL as string, { max: 1 });
  ({ receiver } = await countingReceiver(20));
});
afterAll(async () => {
  await worker?.stop();
  await observer?.end();
  await receiver?.close();
  await h?.close();
});

it(`never holds more than DATABASE_POOL_MAX (${POOL_MAX}) connections while draining many endpoints, all named delivery-worker`, async () => {
  const world = await h.createWorld();
  const endpoints = await Promise.all(Array.from({ length: 8 }, () => h.createEndpoint(world.id, { url: receiver.url, withSecret: false })));
  const ids: string[] = [];
  for (let i = 0; i < 160; i += 1) ids.push(await h.seedDelivery(endpoints[i % endpoints.length]!));

  worker = await spawnService(serviceDir, h.processEnv({ DATABASE_POOL_MAX: String(POOL_MAX) }), { readyTimeoutMs: 60_000 });
  const watch = watchConnections(observer, worker.child.pid as number, pgPort);
  await eventually(
    `the receiver got each of the ${ids.length} deliveries`,
    () => {
      const seen = new Set(receiver.received.map((r) => String(r.headers["webhook-id"])));
      return ids.every((id) => seen.has(id));
    },
    { timeoutMs: 90_000 },
  );
  const seen = await watch.stop();

  expect(seen.samples).toBeGreaterThan(0);
  expect(seen.max).toBeGreaterThan(1);
  expect(seen.max).toBeLessThanOrEqual(POOL_MAX);
  expect([...seen.applicationNames]).toEqual(["delivery-worker"]);
}, 180_000);
