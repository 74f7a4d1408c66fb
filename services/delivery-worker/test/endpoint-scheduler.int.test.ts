/**
 * `EndpointScheduler` (packages/queues) against the real Redis, driven directly: producers park
 * behind an endpoint's backlog, the sweep gives a dead holder's slots to parked jobs, two
 * schedulers on separate connections share one window and one throttle, and the backlog figures.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { EndpointScheduler, JOB_NAMES, SLOT_POLL_MS, createRedisConnection, enqueueDeliveries, openDeliveryQueues, type SchedulerClock } from "@vw/queues";
import { eventually } from "@vw/testing";
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
/** The one shard of this file's layout: every endpoint's jobs and keys are in it. */
let q: Queue;
let otherConnection: Redis;
let otherQueue: Queue;
beforeAll(async () => {
  h = await startHarness({ inProcessWorker: false, queueShards: 1 });
  q = h.deliveries.shards[0]!;
  // A second replica: its own connection and queue handle on the same keys.
  otherConnection = createRedisConnection(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", "worker");
  otherQueue = openDeliveryQueues(otherConnection, h.keyPrefix, 1).shards[0]!;
});
afterAll(async () => {
  await otherQueue.close();
  await otherConnection.quit();
  await h.close();
});

/** Adds a deliver job straight into the delayed set, as the worker does before parking it. */
async function delayedJob(endpointId: string): Promise<string> {
  const id = randomUUID();
  await q.add(JOB_NAMES.deliver, { deliveryId: id, endpointId, run: 0 }, { jobId: id, delay: 3_600_000 });
  return id;
}

it("producers queue an endpoint's new jobs behind its parked ones, others' into the wait list", async () => {
  const scheduler = await EndpointScheduler.forQueue(q, { maxWindow: 2 });
  const busy = randomUUID();
  const idle = randomUUID();
  expect(await scheduler.acquire(busy, "holder-1", "t")).toMatchObject({ granted: true });
  expect(await scheduler.acquire(busy, "holder-2", "t")).toMatchObject({ granted: true });
  const first = await delayedJob(busy);
  await scheduler.park(busy, [first]);
  expect([...(await scheduler.congested([busy, idle]))]).toEqual([busy]);

  const jobs = [busy, idle, busy].map((endpointId) => ({ deliveryId: randomUUID(), endpointId, run: 0 }));
  await enqueueDeliveries(h.deliveries, jobs);
  expect((await q.getWaiting()).map((j) => j.id)).toEqual([jobs[1]!.deliveryId]);
  expect(await q.getJobState(jobs[0]!.deliveryId)).toBe("delayed");
  const stats = await scheduler.stats();
  expect(stats).toMatchObject({ backloggedEndpoints: 1, parkedJobs: 3 });
  // The producer's park intents were dropped by the parks themselves.
  expect(await h.redis.zcard(`${scheduler.base}parking`)).toBe(0);
  expect(stats.oldestParkedAgeSeconds).toBeGreaterThanOrEqual(0);

  // Each freed slot goes to the oldest parked job, in order.
  await scheduler.release(busy, "holder-1", "t", "none");
  expect(await q.getJobState(first)).toBe("waiting");
  expect(await q.getJobState(jobs[0]!.deliveryId)).toBe("delayed");
  // The promoted job's reservation is its slot: no other job can take it meanwhile.
  expect(await scheduler.acquire(busy, "intruder", "t")).toMatchObject({ granted: false });
  expect(await scheduler.acquire(busy, first, "t")).toMatchObject({ granted: true });
  await scheduler.release(busy, "holder-2", "t", "none");
  expect(await q.getJobState(jobs[0]!.deliveryId)).toBe("waiting");
  expect(await q.getJobState(jobs[2]!.deliveryId)).toBe("delayed");
});

it("the sweep takes back a dead holder's slots (expired leases) and promotes parked jobs into them", async () => {
  const live = await EndpointScheduler.forQueue(otherQueue, { maxWindow: 2 });
  const endpoint = randomUUID();
  await live.acquire(endpoint, "doomed", "t");
  await live.acquire(endpoint, "survivor", "t");
  const parked = [await delayedJob(endpoint), await delayedJob(endpoint)];
  await live.park(endpoint, parked);
  expect(await q.getJobState(parked[0]!)).toBe("delayed");
  expect(await live.sweep()).toBe(0);

  // The holder of "doomed" was killed: nobody releases its slot, its lease just runs out
  // (DELIVERY_TIMEOUT_MS + 5 s). Expire it now rather than wait.
  await h.redis.zadd(`${live.base}ep:${endpoint}:leases`, 0, "doomed:t");
  expect(await live.sweep()).toBe(1);
  expect(await q.getJobState(parked[0]!)).toBe("waiting");
  expect(await q.getJobState(parked[1]!)).toBe("delayed");
  expect(await live.inUse(endpoint)).toBe(2);

  // A reservation whose promotion was lost (a crash between hand-off and promote) expires too;
  // the sweep promotes its job again and gives the slot back when the job is not delayed.
  await h.redis.zadd(`${live.base}ep:${endpoint}:leases`, 0, `r:${parked[0]}`);
  await live.sweep();
  expect(await q.getJobState(parked[1]!)).toBe("waiting");
  expect(await h.redis.zcard(`${live.base}ep:${endpoint}:parked`)).toBe(0);
  expect(await h.redis.zscore(`${live.base}backlogged`, endpoint)).toBeNull();
});

it("two schedulers on separate connections share one window and one throttle", async () => {
  const a = await EndpointScheduler.forQueue(q, { maxWindow: 3 });
  const b = await EndpointScheduler.forQueue(otherQueue, { maxWindow: 3 });
  const endpoint = randomUUID();
  expect((await a.acquire(endpoint, "j1", "t")).granted).toBe(true);
  expect((await b.acquire(endpoint, "j2", "t")).granted).toBe(true);
  expect((await a.acquire(endpoint, "j3", "t")).granted).toBe(true);
  // The window opens at the largest (3), for both together.
  expect((await b.acquire(endpoint, "j4", "t")).granted).toBe(false);
  // A 503 seen by one replica halves the window for both: 2 still in flight, so nobody starts.
  await b.release(endpoint, "j2", "t", "throttled");
  expect(await a.windowOf(endpoint)).toBe(1);
  expect((await a.acquire(endpoint, "j4", "t")).granted).toBe(false);
  await a.release(endpoint, "j1", "t", "answered");
  expect(await b.windowOf(endpoint)).toBe(2);
  expect((await b.acquire(endpoint, "j4", "t")).granted).toBe(true);
  expect((await a.acquire(endpoint, "j5", "t")).granted).toBe(false);
  for (const [s, j] of [[a, "j3"], [b, "j4"]] as const) await s.release(endpoint, j, "t", "none");

  // Throttle at 10/s: each start is reserved 100 ms after the previous one, whichever replica asks.
  const waits: number[] = [];
  const t0 = Date.now();
  waits.push(await a.throttle(endpoint, "r1", "t", 10));
  for (let i = 2; i <= 6; i += 1) {
    const s = i % 2 === 0 ? b : a;
    const slot = await s.acquire(endpoint, `r${i}`, "t");
    expect(slot.rate).toBe(10);
    waits.push(slot.waitMs);
    if (slot.granted) await s.release(endpoint, `r${i}`, "t", "none");
  }
  const elapsed = Date.now() - t0;
  waits.forEach((wait, i) => {
    expect(wait).toBeLessThanOrEqual(i * 100);
    expect(wait).toBeGreaterThanOrEqual(i * 100 - elapsed - 1);
  });
  // Removing the rate (a PATCH to null) lifts the throttle at once.
  await a.throttle(endpoint, "r7", "t", null);
  expect(await b.acquire(endpoint, "r8", "t")).toMatchObject({ granted: true, waitMs: 0, rate: 0 });
});

it("an endpoint whose state expired while jobs wait hands on one slot at a time, until an acquire records its window again", async () => {
  const scheduler = await EndpointScheduler.forQueue(q, { maxWindow: 2 });
  const endpoint = randomUUID();
  const hash = `${scheduler.base}ep:${endpoint}`;
  await scheduler.acquire(endpoint, "gone-1", "t");
  await scheduler.acquire(endpoint, "gone-2", "t");
  expect(await h.redis.hget(hash, "win")).toBe("2"); // the opening window, recorded by the first acquire
  const parked = [await delayedJob(endpoint), await delayedJob(endpoint), await delayedJob(endpoint)];
  await scheduler.park(endpoint, parked);
  // A day without a window change: the hash expired. And both holders died (their leases expire).
  await h.redis.del(hash);
  await h.redis.zadd(`${hash}:leases`, 0, "gone-1:t", 0, "gone-2:t");
  // The sweep does not know the largest window: it hands on one slot, not a guess.
  expect(await scheduler.sweep()).toBe(1);
  expect(await Promise.all(parked.map((id) => q.getJobState(id)))).toEqual(["waiting", "delayed", "delayed"]);
  // The promoted job's acquire records the window again; the next hand-off fills it.
  expect(await scheduler.acquire(endpoint, parked[0]!, "t")).toMatchObject({ granted: true });
  expect(await h.redis.hget(hash, "win")).toBe("2");
  expect(await scheduler.sweep()).toBe(1);
  expect(await Promise.all(parked.map((id) => q.getJobState(id)))).toEqual(["waiting", "waiting", "delayed"]);
  expect(await scheduler.inUse(endpoint)).toBe(2);
});

/**
 * Time for the schedulers' in-process policy, moved by the test: `setTimer` callbacks run only when
 * {@link advance} reaches them, so a wait is measured in the clock's milliseconds, not the machine's.
 */
class TestClock implements SchedulerClock {
  private at = 1_000_000;
  private timers: { at: number; fn: () => void }[] = [];
  now(): number {
    return this.at;
  }
  setTimer(ms: number, fn: () => void): () => void {
    const timer = { at: this.at + ms, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }
  /** Timers waiting to fire. */
  get pending(): number {
    return this.timers.length;
  }
  /** Moves to the earliest timer and fires it. */
  advance(): void {
    this.timers.sort((a, b) => a.at - b.at);
    const next = this.timers.shift();
    if (!next) throw new Error("no timer to advance to");
    this.at = Math.max(this.at, next.at);
    next.fn();
  }
}

/**
 * Runs `acquiring` to its end on `clock`, firing its timers one by one as it waits on them; resolves
 * with its result and how much clock time passed. `before(n)` runs before the n-th timer fires.
 */
async function onClock<T>(clock: TestClock, acquiring: Promise<T>, before?: (n: number) => Promise<void>): Promise<{ result: T; elapsed: number }> {
  const started = clock.now();
  let settled: { result: T } | null = null;
  const done = acquiring.then((result) => (settled = { result }));
  for (let n = 0; ; n += 1) {
    await eventually("the acquire settled or waits on a timer", () => settled !== null || clock.pending > 0, { intervalMs: 2 });
    if (settled !== null) break;
    await before?.(n);
    if (settled === null && clock.pending > 0) clock.advance();
  }
  await done;
  return { result: (settled as unknown as { result: T }).result, elapsed: clock.now() - started };
}

it("a job finding a busy endpoint's window full waits for the next slot instead of parking, unless jobs are parked there", async () => {
  const clock = new TestClock();
  const a = await EndpointScheduler.forQueue(q, { maxWindow: 2, clock });
  const b = await EndpointScheduler.forQueue(otherQueue, { maxWindow: 2 });
  const endpoint = randomUUID();
  await a.acquire(endpoint, "h1", "t");
  await a.acquire(endpoint, "h2", "t");
  // A deadline far away on the clock: only a freed slot can end these waits.
  let granted = false;
  const waiting = a.acquireWithin(endpoint, "w1", "t", 600_000).then((slot) => ((granted = slot.granted), slot));
  await eventually("the job waits for a slot", () => clock.pending > 0);
  expect(granted).toBe(false);
  await a.release(endpoint, "h1", "t", "answered"); // this process's release wakes the waiter
  expect(await waiting).toMatchObject({ granted: true, backlogged: false });

  // Another replica's release is seen at the waiter's next poll.
  const other = await onClock(clock, a.acquireWithin(endpoint, "w2", "t", 600_000), async (n) => {
    if (n === 2) await b.release(endpoint, "h2", "t", "answered");
  });
  expect(other.result).toMatchObject({ granted: true });
  expect(other.elapsed).toBe(3 * SLOT_POLL_MS);

  // With jobs parked, a newcomer queues behind them at once (FIFO): no wait, refused as backlogged.
  const parked = await delayedJob(endpoint);
  await a.park(endpoint, [parked]);
  expect(await a.acquireWithin(endpoint, "w3", "t", 600_000)).toMatchObject({ granted: false, backlogged: true });
  // And a zero wait is the plain acquire.
  expect(await a.acquireWithin(endpoint, "w4", "t", 0)).toMatchObject({ granted: false });
});

it("a job waits longer for an endpoint that answered lately (up to five times its wait since the answer), and only its wait for one that did not", async () => {
  const clock = new TestClock();
  const a = await EndpointScheduler.forQueue(q, { maxWindow: 1, clock });
  const quiet = randomUUID();
  const answering = randomUUID();
  const refusedAfter = async (endpoint: string, job: string): Promise<number> => {
    const { result, elapsed } = await onClock(clock, a.acquireWithin(endpoint, job, "t", 200));
    expect(result).toMatchObject({ granted: false, backlogged: false });
    return elapsed;
  };

  // Never answered here (hung, or new): refused once its 200 ms have passed.
  await a.acquire(quiet, "holder", "t");
  expect(await refusedAfter(quiet, "q1")).toBe(200);
  // A timeout is no answer: still 200 ms.
  await a.release(quiet, "holder", "t", "unresponsive");
  await a.acquire(quiet, "holder2", "t");
  expect(await refusedAfter(quiet, "q2")).toBe(200);

  // Answered just now, then its window filled again and stalled: the waiter gives it five times its
  // wait from that answer (1 s) before parking.
  await a.acquire(answering, "first", "t");
  await a.release(answering, "first", "t", "answered");
  await a.acquire(answering, "stalled", "t");
  expect(await refusedAfter(answering, "w1")).toBe(1000);
  // The answer is now a second old: back to the plain 200 ms.
  expect(await refusedAfter(answering, "w2")).toBe(200);

  // Within the longer wait, the stalled attempt's answer frees the slot for the waiter, 500 ms in.
  await a.release(answering, "stalled", "t", "answered");
  await a.acquire(answering, "again", "t");
  const { result, elapsed } = await onClock(clock, a.acquireWithin(answering, "w3", "t", 200), async (n) => {
    if (n === 500 / SLOT_POLL_MS) await a.release(answering, "again", "t", "answered");
  });
  expect(result).toMatchObject({ granted: true });
  expect(elapsed).toBe(500);
});

it("a run's release takes its job out of the parked set, where a producer's re-enqueue may have put it meanwhile", async () => {
  const scheduler = await EndpointScheduler.forQueue(q, { maxWindow: 2 });
  const endpoint = randomUUID();
  const parkedKey = `${scheduler.base}ep:${endpoint}:parked`;
  const running = { deliveryId: randomUUID(), endpointId: endpoint, run: 0 };
  await enqueueDeliveries(h.deliveries, [running]);
  expect(await scheduler.acquire(endpoint, "holder", "t")).toMatchObject({ granted: true });
  // The job's first run, never delayed (fresh), takes the other slot of the window.
  expect(await scheduler.acquire(endpoint, running.deliveryId, "run-1", true)).toMatchObject({ granted: true });
  // Another job waits parked, so the endpoint is congested; then ingest re-enqueues the running
  // job's delivery (a retried POST of its event): BullMQ ignores the add of an existing id, but
  // the producer parks that id behind the other.
  const other = await delayedJob(endpoint);
  await scheduler.park(endpoint, [other]);
  await enqueueDeliveries(h.deliveries, [running]);
  expect(await h.redis.zrange(parkedKey, "0", "-1")).toEqual([other, running.deliveryId]);

  // The run ends: its id leaves the parked set, and the freed slot goes to the other job.
  await scheduler.release(endpoint, running.deliveryId, "run-1", "answered");
  expect(await h.redis.zcard(parkedKey)).toBe(0);
  expect(await q.getJobState(other)).toBe("waiting");
  expect(await h.redis.zscore(`${scheduler.base}backlogged`, endpoint)).toBeNull();
  expect(await scheduler.inUse(endpoint)).toBe(2); // the holder and the other job's reservation
});

it("the sweep parks a job whose process died between moving it to the delayed set and parking it", async () => {
  const scheduler = await EndpointScheduler.forQueue(otherQueue, { maxWindow: 1, parkIntentGraceMs: 0 });
  const endpoint = randomUUID();
  const parking = `${scheduler.base}parking`;
  expect(await scheduler.acquire(endpoint, "holder", "t")).toMatchObject({ granted: true });
  // A worker parking a job records the intent, moves the job to the delayed set for the park
  // timeout (an hour), and is killed before the park itself.
  const orphan = randomUUID();
  await scheduler.intendPark(new Map([[endpoint, [orphan]]]));
  await q.add(JOB_NAMES.deliver, { deliveryId: orphan, endpointId: endpoint, run: 0 }, { jobId: orphan, delay: 3_600_000 });
  // Another was killed before even the move: its job is not delayed (here: it does not exist).
  await scheduler.intendPark(new Map([[endpoint, ["never-moved"]]]));
  expect(await h.redis.zcard(parking)).toBe(2);

  await scheduler.sweep();
  expect(await h.redis.zrange(`${scheduler.base}ep:${endpoint}:parked`, "0", "-1")).toEqual([orphan]);
  expect(await h.redis.zcard(parking)).toBe(0);
  // Parked now, the job gets the next free slot instead of waiting out the hour.
  await scheduler.release(endpoint, "holder", "t", "none");
  expect(await q.getJobState(orphan)).toBe("waiting");

  // Within the grace (10 s by default), an intent is left to the process that recorded it.
  const patient = await EndpointScheduler.forQueue(otherQueue, { maxWindow: 1 });
  await patient.intendPark(new Map([[endpoint, ["just-now"]]]));
  await patient.sweep();
  expect(await h.redis.zrange(parking, "0", "-1")).toEqual([`${endpoint}/just-now`]);
  await patient.abandonPark(new Map([[endpoint, ["just-now"]]]));
  expect(await h.redis.zcard(parking)).toBe(0);
});
