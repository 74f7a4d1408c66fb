/**
 * The recover route on admin-api's side: the dry-run count over the window, validation, the
 * recovery it records and the `recover.v1` job it queues, 409 on a disabled endpoint, progress
 * reads. The job's run (every delivery reaching a verifying receiver again) is tested with the
 * worker, in services/delivery-worker/test/recover.int.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { JOB_NAMES } from "@vw/queues";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { expectProblem } from "../test/endpoint-fixtures.js";
import { countInState, createCurrentEndpoint, createWorld, insertDelivery, type TestWorld } from "../test/delivery-fixtures.js";

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "any" });
});
afterAll(async () => {
  await api.close();
});

const HOUR = 3_600_000;
const ago = (ms: number) => new Date(Date.now() - ms);

/** A world with one endpoint and deliveries of every status, some inside and some outside the last day. */
async function endpointWithHistory(): Promise<{ w: TestWorld; id: string; recentFailed: string[] }> {
  const w = await createWorld(api);
  const { id } = await createCurrentEndpoint(api, w, "http://127.0.0.1:9/hook");
  const recentFailed: string[] = [];
  for (const at of [ago(2 * HOUR), ago(20 * HOUR), ago(1000)]) recentFailed.push(await insertDelivery(api, { endpointId: id, worldId: w.worldId, status: "failed", createdAt: at }));
  await insertDelivery(api, { endpointId: id, worldId: w.worldId, status: "failed", createdAt: ago(48 * HOUR) });
  for (const status of ["delivered", "pending", "skipped"] as const) await insertDelivery(api, { endpointId: id, worldId: w.worldId, status, createdAt: ago(HOUR) });
  // Another endpoint's failure in the same window is not this endpoint's.
  const other = await createCurrentEndpoint(api, w, "http://127.0.0.1:9/other");
  await insertDelivery(api, { endpointId: other.id, worldId: w.worldId, status: "failed", createdAt: ago(HOUR) });
  return { w, id, recentFailed };
}

describe("POST .../endpoints/{id}/recover", () => {
  it("dry run: counts the endpoint's failed deliveries created in [since, until), queues nothing", async () => {
    const { w, id } = await endpointWithHistory();
    const recover = (body: unknown) => api.request("POST", `${w.endpoints}/${id}/recover`, { body });
    expect(await recover({ since: ago(24 * HOUR).toISOString(), dryRun: true })).toMatchObject({ status: 200, body: { count: 3 } });
    expect((await recover({ since: ago(72 * HOUR).toISOString(), dryRun: true })).body).toEqual({ count: 4 });
    expect((await recover({ since: ago(24 * HOUR).toISOString(), until: ago(HOUR).toISOString(), dryRun: true })).body).toEqual({ count: 2 });
    expect((await recover({ since: ago(HOUR).toISOString(), dryRun: true })).body).toEqual({ count: 1 });
    expect(await api.recoveryQueue.getJobCounts("waiting", "delayed", "active")).toEqual({ waiting: 0, delayed: 0, active: 0 });
    expect(await api.prisma.deliveryRecovery.count({ where: { endpointId: id } })).toBe(0);
  });

  it("records a queued recovery with its total and fixed window, queues recover.v1 under its id, answers 202", async () => {
    const { w, id } = await endpointWithHistory();
    const since = ago(24 * HOUR).toISOString();
    const before = Date.now();
    const res = await api.request("POST", `${w.endpoints}/${id}/recover`, { body: { since } });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      id: expect.any(String),
      endpointId: id,
      status: "queued",
      total: 3,
      requeued: 0,
      since: new Date(since).toISOString(),
      until: expect.any(String),
      error: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(Date.parse(res.body.until)).toBeGreaterThanOrEqual(before - 5);
    expect(res.headers.get("location")).toBe(`${w.endpoints}/${id}/recoveries/${res.body.id}`);
    const job = await api.recoveryQueue.getJob(res.body.id);
    expect({ name: job?.name, data: job?.data }).toEqual({ name: JOB_NAMES.recover, data: { recoveryId: res.body.id } });

    const read = await api.request("GET", `${w.endpoints}/${id}/recoveries/${res.body.id}`);
    expect(read).toMatchObject({ status: 200, body: res.body });
    // Nothing was touched yet: the worker does the sending.
    expect(await countInState(api, id, "failed")).toBe(4);
  });

  it("refuses a disabled endpoint with 409 (the dry run still counts)", async () => {
    const { w, id } = await endpointWithHistory();
    expect((await api.request("POST", `${w.endpoints}/${id}/disable`)).status).toBe(200);
    const since = ago(24 * HOUR).toISOString();
    expectProblem(await api.request("POST", `${w.endpoints}/${id}/recover`, { body: { since } }), 409, "endpoint-disabled");
    expect((await api.request("POST", `${w.endpoints}/${id}/recover`, { body: { since, dryRun: true } })).body).toEqual({ count: 3 });
    expect(await api.prisma.deliveryRecovery.count({ where: { endpointId: id } })).toBe(0);
  });

  it("refuses a bad body naming the field, and unknown endpoints", async () => {
    const { w, id } = await endpointWithHistory();
    const path = `${w.endpoints}/${id}/recover`;
    const cases: [unknown, string][] = [
      [{}, ""],
      [{ since: "yesterday" }, "/since"],
      [{ since: "2026-11-01T00:00:00Z", until: "2026-10-01T00:00:00Z" }, "/until"],
      [{ since: "2026-11-01T00:00:00Z", until: "2026-11-01T00:00:00Z" }, "/until"],
      [{ since: "2026-11-01T00:00:00Z", dryRun: "yes" }, "/dryRun"],
      [{ since: "2026-11-01T00:00:00Z", extra: 1 }, ""],
      [{ since: new Date(Date.now() + HOUR).toISOString() }, "/since"],
    ];
    for (const [body, pointer] of cases) {
      const res = await api.request("POST", path, { body });
      expectProblem(res, 400);
      if (pointer !== "") expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ pointer })]));
    }
    expectProblem(await api.request("POST", path), 400);
    expectProblem(await api.request("POST", `${w.endpoints}/0b9c0e55-3f43-4c1e-9a43-1c8a4a7d2f10/recover`, { body: { since: "2026-11-01T00:00:00Z" } }), 404);
    expectProblem(await api.request("GET", path), 405);
  });
});

describe("GET .../endpoints/{id}/recoveries/{recoveryId}", () => {
  it("is 404 for an unknown id, a malformed one, and another endpoint's recovery", async () => {
    const { w, id } = await endpointWithHistory();
    const other = await createCurrentEndpoint(api, w, "http://127.0.0.1:9/third");
    const started = await api.request("POST", `${w.endpoints}/${id}/recover`, { body: { since: ago(HOUR).toISOString() } });
    expect(started.status).toBe(202);
    expectProblem(await api.request("GET", `${w.endpoints}/${other.id}/recoveries/${started.body.id}`), 404);
    expectProblem(await api.request("GET", `${w.endpoints}/${id}/recoveries/0b9c0e55-3f43-4c1e-9a43-1c8a4a7d2f10`), 404);
    expectProblem(await api.request("GET", `${w.endpoints}/${id}/recoveries/not-an-id`), 404);
  });
});
